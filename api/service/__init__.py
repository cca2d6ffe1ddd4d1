"""The one service every face of the ledger calls (``api.service.ledger_service``), and the
typed reply models it answers with (``api.service.models``, light enough to import alone)."""
