"""Teaching aids: the textbook (unit-time) diagram of a schedule (issue 14)."""
