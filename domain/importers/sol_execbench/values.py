"""Names, times and nanoseconds as KernelIndex's own SOL importer writes them.

Shared by the folder and the leaderboard importers, so that their digests equal the public
catalog's for the same source data.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from domain.importers.names import MAX_NAME, slug
from domain.importers.sol_execbench.fields import SolFormatError, json_type
from domain.timestamps import format_time

_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?"
    r"(Z|z|[+-]\d{2}:\d{2})?"
)


def kebab(value: str) -> str:
    """Lower-case, runs of other characters → '-', trimmed, at most 100 characters.

    Unlike :func:`~domain.importers.names.object_name`, cut *after* trimming: a name may end
    in '-', as KernelIndex's SOL importer writes it.
    """
    return slug(value)[:MAX_NAME]


def to_utc_instant(value: object, where: str) -> str:
    """A source timestamp as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC, milliseconds).

    A timestamp without a zone is UTC by convention (the SOL API writes naive UTC times);
    digits below the millisecond are truncated, as a JavaScript ``Date`` does (KernelIndex's
    conversion, so that ``observedAt`` and the run digest agree with the catalog).
    """
    if not isinstance(value, str):
        raise SolFormatError(f"{where} must be a timestamp string, got {json_type(value)}")
    match = _TIMESTAMP.fullmatch(value.strip())
    if match is None:
        raise SolFormatError(f"{where}: {value!r} is not an ISO 8601 date-time")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    millis = int((fraction or "0")[:3].ljust(3, "0"))
    if zone is None or zone in ("Z", "z"):
        tz = UTC
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    try:
        moment = datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second or 0),
            millis * 1000,
            tzinfo=tz,
        ).astimezone(UTC)
    except (ValueError, OverflowError):
        raise SolFormatError(f"{where}: {value!r} is not a valid date-time") from None
    return format_time(moment)
