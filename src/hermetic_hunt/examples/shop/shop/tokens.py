"""API tokens, cached for a time-to-live; the clock is injectable (for tests) and bound at definition."""

import time


class TokenCache:
    def __init__(self, ttl: float, clock=time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._tokens: dict[str, tuple[float, str]] = {}

    def put(self, name: str, token: str) -> None:
        self._tokens[name] = (self._clock(), token)

    def get(self, name: str) -> str | None:
        entry = self._tokens.get(name)
        if entry is None:
            return None
        stored, token = entry
        if self._clock() - stored >= self.ttl:
            del self._tokens[name]
            return None
        return token
