"""RFC 3339 timestamps as the ledger writes and reads them (UTC, trailing 'Z')."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from domain.errors import DomainError

_RFC3339 = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})$"
)

_FRACTION = re.compile(r"\.([0-9]+)")


# The form the ledger writes (UTC, 'Z', at most microseconds), which ``fromisoformat`` reads
# to the very value the general path below gives: UTC, ``datetime.UTC`` as its tzinfo.
_UTC_FORM = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z\Z")
# Times read lately: an event's issuedAt is read by its predicate's schema and again by the
# key rules, and every verifier and admission reads several per event. Values are immutable.
_RECENT: dict[str, datetime] = {}
_RECENT_KEPT = 4096


def parse_time(value: str, where: str = "timestamp") -> datetime:
    """Parse an RFC 3339 date-time with an explicit offset; naive times are refused."""
    if type(value) is str:
        found = _RECENT.get(value)
        if found is not None:
            return found
        if _UTC_FORM.match(value):
            try:
                found = datetime.fromisoformat(value)
            except ValueError:
                found = None  # no such day: the general path says so
            if found is not None:
                if len(_RECENT) >= _RECENT_KEPT:
                    _RECENT.clear()
                _RECENT[value] = found
                return found
    return _parse_rfc3339(value, where)


def _parse_rfc3339(value: str, where: str) -> datetime:
    """The general reader (any offset, any number of fraction digits): the reference the
    fast path of :func:`parse_time` is property-tested against."""
    if not isinstance(value, str) or not _RFC3339.match(value):
        raise DomainError(
            f"{where}: {value!r} is not an RFC 3339 date-time like 2026-08-22T11:05:31Z"
        )
    text = value.replace("Z", "+00:00")
    fraction = _FRACTION.search(text) if "." in text else None
    if fraction and len(fraction.group(1)) > 6:
        # Python keeps microseconds; finer digits are truncated, not rounded.
        text = text.replace(fraction.group(0), "." + fraction.group(1)[:6])
    try:
        return datetime.fromisoformat(text).astimezone(UTC)
    except (ValueError, OverflowError):  # 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise DomainError(f"{where}: {value!r} is not a valid date-time") from None


def format_time(moment: datetime) -> str:
    """UTC, millisecond precision, 'Z' suffix: the form the ledger records."""
    if moment.tzinfo is None:
        raise ValueError("naive datetime")
    utc = moment.astimezone(UTC)
    # isoformat pads the year to four digits (strftime's %Y does not, below 1000, on glibc).
    return utc.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def utc_now() -> datetime:
    return datetime.now(UTC)
