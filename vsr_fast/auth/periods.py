"""A budget's period in UTC: a minute, an hour and a day are the clock's (a day from midnight UTC), a month is the
calendar month (December from the 1st to the 31st), so a budget resets when an invoice's month does."""
from __future__ import annotations

import datetime as dt

_FIXED_S = {"minute": 60, "hour": 3_600, "day": 86_400}


def current(period: str, now: float) -> tuple[int, float]:
    """(the number of the period holding ``now``, when it ends in Unix seconds): the number names its counter."""
    fixed = _FIXED_S.get(period)
    if fixed is not None:
        index = int(now // fixed)
        return index, (index + 1) * fixed
    assert period == "month", period
    day = dt.datetime.fromtimestamp(now, dt.timezone.utc)
    index = day.year * 12 + day.month - 1
    year, month = divmod(index + 1, 12)
    return index, dt.datetime(year, month + 1, 1, tzinfo=dt.timezone.utc).timestamp()
