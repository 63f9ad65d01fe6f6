"""Login sessions, kept in a small in-memory cache with a time-to-live."""

import time


class SessionCache:
    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._entries: dict[str, tuple[float, str]] = {}

    def put(self, token: str, user: str) -> None:
        self._entries[token] = (time.monotonic(), user)

    def get(self, token: str) -> str | None:
        entry = self._entries.get(token)
        if entry is None:
            return None
        stored, user = entry
        if time.monotonic() - stored >= self.ttl:
            del self._entries[token]
            return None
        return user
