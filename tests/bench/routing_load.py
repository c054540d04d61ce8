#!/usr/bin/env python3
"""The client of run_routing_bench.sh: a mixed two-model streaming workload against one gateway.

  routing_load.py --port P [--requests N] [--concurrency C] [--b-share F] [--max-tokens T]
                  [--seed S]

The request sequence is fixed by the seed (each request is model-b with probability F, else
model-a), so every policy under comparison gets the same one. C clients take the next request as
soon as their last one ended. Each request is a streamed /v1/completions with a prompt of a few
tokens (the synthesized models' byte-level vocabulary of 512 makes every character about one
token, so a chat template's framing alone would be tens of tokens of prefill on a CPU), and asks
for max_tokens; TTFT is request sent -> the first chunk with text. The last chunk's stop record says whether the backend served it cold (model_state cold or
evicted_then_loaded) and where its time to first token went on the backend (phases).

Prints one JSON object: requests, errors, ttft_p50_ms, ttft_p99_ms, served_cold, and the backend's
TTFT phases summed over all requests (ms): queue, load (load + warmup), compute (prefill +
first_decode).
"""
import argparse
import http.client
import json
import random
import threading
import time


def percentile(values, q):
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def one_request(port, model, index, max_tokens):
    """(ttft_ms or None, the stop record or {}) for one streamed completion."""
    body = json.dumps({
        "model": model,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "prompt": f"hi {index % 10}",
    })
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    sent = time.monotonic()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        resp.read()
        conn.close()
        return None, {}
    ttft = None
    record = None
    for raw in resp:
        line = raw.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if ttft is None:
            for choice in chunk.get("choices", []):
                if choice.get("text"):
                    ttft = (time.monotonic() - sent) * 1000.0
        if "cutline" in chunk:
            record = chunk["cutline"]
    conn.close()
    return ttft, record or {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--requests", type=int, default=60)
    ap.add_argument("--concurrency", type=int, default=3)
    ap.add_argument("--b-share", type=float, default=0.33)
    ap.add_argument("--max-tokens", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    models = ["model-b" if rng.random() < args.b_share else "model-a" for _ in range(args.requests)]
    lock = threading.Lock()
    next_index = [0]
    ttfts, record_ttfts, errors, cold = [], [], [0], [0]
    phases = {"queue": 0.0, "load": 0.0, "compute": 0.0}

    def client():
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= len(models):
                return
            try:
                ttft, record = one_request(args.port, models[i], i, args.max_tokens)
            except (OSError, http.client.HTTPException, ValueError):
                ttft, record = None, {}
            ph = record.get("phases", {})
            with lock:
                if ttft is None:
                    errors[0] += 1
                else:
                    ttfts.append(ttft)
                    if "ttft_ms" in record:
                        record_ttfts.append(record["ttft_ms"])
                cold[0] += record.get("model_state") in ("cold", "evicted_then_loaded")
                phases["queue"] += ph.get("queue", 0)
                phases["load"] += ph.get("load", 0) + ph.get("warmup", 0)
                phases["compute"] += ph.get("prefill", 0) + ph.get("first_decode", 0)

    threads = [threading.Thread(target=client) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({
        "requests": args.requests,
        "errors": errors[0],
        "ttft_p50_ms": round(percentile(ttfts, 0.50), 1),
        "ttft_p99_ms": round(percentile(ttfts, 0.99), 1),
        "record_ttft_p50_ms": round(percentile(record_ttfts, 0.50), 1),
        "record_ttft_p99_ms": round(percentile(record_ttfts, 0.99), 1),
        "served_cold": cold[0],
        "phase_ms": {k: round(v) for k, v in phases.items()},
    }))


if __name__ == "__main__":
    main()
