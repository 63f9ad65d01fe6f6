"""Sampled checkout metrics, sent to a metrics service."""

import json
import random
import urllib.request

METRICS_URL = "http://metrics.example.invalid/v1/events"
SAMPLE_RATE = 0.25


def report(event: str, payload: dict) -> bool:
    """Send one in four events (bug: a send failure breaks the checkout)."""
    if random.random() >= SAMPLE_RATE:
        return False
    body = json.dumps({"event": event, **payload}).encode()
    request = urllib.request.Request(METRICS_URL, data=body, method="POST")
    with urllib.request.urlopen(request, timeout=2):
        return True
