"""Direct-read baseline: the upstream's turn read with `requests` streaming, parsing nothing (bench only).

`POST SendStreamingMessage` with `stream=True`, then `iter_content(chunk_size=None)`: urllib3 hands
over one HTTP chunk per iteration, and both the replay upstream and a2a-sdk send one SSE event per
chunk, so chunks = A2A events. Nothing is decoded; the loop stops at the end of the response. Prints
one JSON line: per repetition the elapsed time (POST to last byte), chunks, bytes and this reader's
own CPU time.

Usage: python bench/direct_read.py --url URL --token T --text "[DELTAS 20000]" --reps 5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid

import requests


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", default=None)
    parser.add_argument("--text", required=True)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()
    session = requests.Session()
    headers = {"A2A-Version": "1.0", "Accept": "text/event-stream"}
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    reps = []
    for i in range(args.warmup + args.reps):
        body = {
            "jsonrpc": "2.0",
            "id": str(uuid.uuid4()),
            "method": "SendStreamingMessage",
            "params": {
                "message": {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "parts": [{"text": args.text}],
                    "contextId": f"bench-{uuid.uuid4().hex}",
                },
                "configuration": {"acceptedOutputModes": ["text/plain"]},
            },
        }
        cpu0 = time.process_time()
        t0 = time.monotonic()
        chunks = 0
        size = 0
        with session.post(args.url, json=body, headers=headers, stream=True, timeout=(5, 300)) as response:
            response.raise_for_status()
            for chunk in response.iter_content(chunk_size=None):
                chunks += 1
                size += len(chunk)
        elapsed = time.monotonic() - t0
        cpu = time.process_time() - cpu0
        if i >= args.warmup:
            reps.append({"elapsed_s": elapsed, "chunks": chunks, "bytes": size, "reader_cpu_s": cpu})
    print(json.dumps({"reps": reps}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
