#!/usr/bin/env python3
"""Fault soak: the real cutline-gateway in front of a scripted chaotic upstream.

Every stream draws an upstream fault and a client behaviour at random (seeded), over HTTP/1.1 or
HTTP/2 (h2c prior knowledge, a small client below), and knows the stop cause the gateway must
label it with. After the run it checks, and exits 1 on any miss:
  - every request has exactly one access-log line (its stop record), with the expected cause;
  - every response the client read to its end carries exactly one stop record, with that cause;
  - cutline_stops_total rose by exactly the per-cause counts injected;
  - no token reservation is left (cutline_pool_reserved_tokens back to 0);
  - the gateway's descriptors and resident memory return to their idle level.

Usage: soak.py --gateway BIN [--streams N] [--concurrency C] [--seed S] [--keep DIR]
       soak.py upstream            (the chaotic upstream alone; prints "PORT n")
Python 3 standard library only.
"""

import argparse
import asyncio
import collections
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

# --------------------------------------------------------------------------------------------
# The chaotic upstream: an OpenAI-compatible HTTP/1.1 server whose behaviour per request is the
# `X-Soak-Fault` header: NAME[:K] where K is the number of tokens sent before the fault.
#   ok          K tokens, finish_reason stop, [DONE]                  -> eos
#   long        200 tokens 5 ms apart (the client cancels or resets)  -> client_cancel
#   big         64 tokens of 2 KiB (a slow reader's back-pressure)    -> eos
#   drop        K tokens, then close                                  -> upstream_disconnect
#   half_close  K tokens, then shutdown(SHUT_WR), connection kept     -> upstream_disconnect
#   stall       K >= 1 tokens, then silence                           -> gateway_idle_timeout
#   stall0      no token, silence                                     -> gateway_ttft_timeout
#   partial_head half a response head, then silence                   -> gateway_ttft_timeout
#   drop_head   close before any response byte                        -> upstream_disconnect
#   rst         K tokens, then a TCP reset                            -> upstream_disconnect
#   s500        500 with an OpenAI error body                         -> upstream_error
#   s500_cut    500 whose body ends early (connection closed)         -> upstream_disconnect
#   error_event K tokens, then an SSE error event                     -> upstream_error
#   garbage     K tokens, then a data line that is not JSON           -> upstream_error
#   trickle     K tokens, each event written a few bytes at a time    -> eos
#   long_cl     Content-Length framing that promises more than sent   -> upstream_disconnect
#   short_cl    Content-Length shorter than the stream (the rest of
#               the bytes follow it on the kept-alive connection)     -> upstream_disconnect
#   extra_bytes a complete stream, then bytes nobody asked for        -> eos
# Client behaviours: read to the end; cancel mid-stream (close / RST_STREAM) or before the answer
# began; a slow reader (4 KiB receive buffer or HTTP/2 window); a reader that stops (HTTP/2 window
# never opened: gateway_idle_timeout); pipelining 2-3 requests; non-streamed requests.
# Timeouts (policy below): ttft 1.2 s, idle 1 s, generous for a loaded 2-core machine, where a
# scheduler stall of a few hundred ms in this script's own upstream is a real idle gap.
# Idle kept-alive connections are closed after 1 s (so the gateway's descriptors return to idle).
# --------------------------------------------------------------------------------------------

IDLE_CLOSE_S = 1.0


def chunk(i, text, finish=None):
    c = {
        "id": "chatcmpl-soak",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "soak",
        "choices": [{"index": 0, "delta": {"content": text} if text is not None else {},
                     "finish_reason": finish}],
    }
    return ("data: " + json.dumps(c, separators=(",", ":")) + "\n\n").encode()


def completion_body(tokens):
    return json.dumps({
        "id": "chatcmpl-soak", "object": "chat.completion", "created": 1, "model": "soak",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "tok " * tokens},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": tokens, "total_tokens": tokens + 3},
    }).encode()


async def read_request(reader):
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_CLOSE_S)
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b""):
                    pass
                break
            body += await reader.readexactly(size)
            await reader.readline()
    elif "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    return lines[0], headers, body


async def serve_one(reader, writer, headers, body):
    """Answers one request; returns False when the connection must not be reused."""
    fault = headers.get("x-soak-fault", "ok")
    name, _, k = fault.partition(":")
    k = int(k) if k else 3
    try:
        stream = json.loads(body or b"{}").get("stream", False)
    except ValueError:
        stream = False
    sse_head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")

    def framed(data):
        return b"%x\r\n%s\r\n" % (len(data), data)

    if name == "drop_head":
        return False
    if name == "partial_head":
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
        await writer.drain()
        await asyncio.sleep(30)
        return False
    if name == "s500_cut":
        err = b'{"error":{"message":"soak: internal error","type":"server_error","code":null}}'
        writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(err) + 100, err))
        await writer.drain()
        return False
    if name == "s500":
        err = b'{"error":{"message":"soak: internal error","type":"server_error","code":null}}'
        writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(err), err))
        return True
    if not stream:
        data = completion_body(k)
        if name == "drop":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(data), data[: len(data) // 2]))
            await writer.drain()
            return False
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
        return True
    if name in ("long_cl", "short_cl"):
        events = b"".join(chunk(i, "t%d " % i) for i in range(k))
        rest = chunk(k, None, "stop") + b"data: [DONE]\n\n"
        if name == "long_cl":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(events) + 4096, events))
            await writer.drain()
            return False
        # Declares only the tokens, cut in the middle of the last event, and sends the rest
        # behind them: bytes after the end of a response on a kept-alive connection.
        cut = len(events) - 7
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (cut, events + rest))
        await writer.drain()
        return True
    writer.write(sse_head)
    if name == "long":
        for i in range(200):
            writer.write(framed(chunk(i, "t%d " % i)))
            await writer.drain()
            await asyncio.sleep(0.005)
        writer.write(framed(chunk(200, None, "stop") + b"data: [DONE]\n\n") + b"0\r\n\r\n")
        return True
    if name == "big":
        text = "x" * 2048
        for i in range(64):
            writer.write(framed(chunk(i, text)))
            await writer.drain()
        writer.write(framed(chunk(64, None, "stop") + b"data: [DONE]\n\n") + b"0\r\n\r\n")
        return True
    if name == "stall0":
        await asyncio.sleep(30)
        return False
    for i in range(k):
        data = chunk(i, "t%d " % i)
        if name == "trickle":
            for off in range(0, len(data), 37):
                writer.write(framed(data[off:off + 37]))
                await writer.drain()
                await asyncio.sleep(0.001)
        else:
            writer.write(framed(data))
            await writer.drain()
            await asyncio.sleep(0.002)
    if name == "drop":
        return False
    if name == "rst":
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return False
    if name == "half_close":
        writer.write_eof()
        await writer.drain()
        await asyncio.sleep(2)
        return False
    if name == "stall":
        await asyncio.sleep(30)
        return False
    if name == "extra_bytes":
        # A complete response, then bytes no request asked for on the kept-alive connection (a
        # desynchronised upstream): they must not become the next request's answer.
        writer.write(framed(chunk(k, None, "stop") + b"data: [DONE]\n\n") + b"0\r\n\r\n" +
                     b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        return True
    if name == "error_event":
        writer.write(framed(b'data: {"error":{"message":"soak: error event","type":"server_error"}}'
                            b"\n\n") + b"0\r\n\r\n")
        return True
    if name == "garbage":
        writer.write(framed(b"data: {this is not json\n\n") + b"0\r\n\r\n")
        return True
    writer.write(framed(chunk(k, None, "stop") + b"data: [DONE]\n\n") + b"0\r\n\r\n")
    return True


async def upstream_conn(reader, writer):
    try:
        while True:
            try:
                _, headers, body = await read_request(reader)
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError):
                break
            if not await serve_one(reader, writer, headers, body):
                break
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.transport.abort() if writer.transport else None


async def upstream_main():
    server = await asyncio.start_server(upstream_conn, "127.0.0.1", 0, backlog=1024)
    print("PORT %d" % server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


# --------------------------------------------------------------------------------------------
# HTTP/1.1 client
# --------------------------------------------------------------------------------------------

class Resp:
    def __init__(self):
        self.status = None
        self.headers = {}
        self.trailers = {}
        self.body = b""
        self.complete = False


async def h1_read_response(reader, slow=False):
    r = Resp()
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    r.status = int(lines[0].split()[1])
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            r.headers[k.strip().lower()] = v.strip()
    if r.headers.get("transfer-encoding", "").lower() == "chunked":
        body = []
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                while True:
                    line = await reader.readline()
                    if line in (b"\r\n", b""):
                        break
                    k, _, v = line.decode("latin-1").partition(":")
                    r.trailers[k.strip().lower()] = v.strip()
                break
            body.append(await reader.readexactly(size))
            await reader.readline()
            if slow:
                await asyncio.sleep(0.002)
        r.body = b"".join(body)
    else:
        r.body = await reader.readexactly(int(r.headers.get("content-length", "0")))
    r.complete = True
    return r


def h1_request(rid, fault, stream, port):
    body = json.dumps({"model": "soak", "messages": [{"role": "user", "content": "hi"}],
                       "stream": stream, "max_tokens": 4096}).encode()
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: application/json\r\nX-Request-Id: %s\r\nX-Soak-Fault: %s\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (port, rid.encode(), fault.encode(), len(body), body))


async def h1_open(port, rcvbuf=0):
    if rcvbuf:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.setblocking(False)
        await asyncio.get_running_loop().sock_connect(s, ("127.0.0.1", port))
        return await asyncio.open_connection(sock=s, limit=1 << 20)
    return await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)


# --------------------------------------------------------------------------------------------
# A small HTTP/2 client (h2c, prior knowledge): enough to send a POST, read DATA and trailers,
# read :status (the peer is told to keep no HPACK dynamic table) and reset a stream.
# --------------------------------------------------------------------------------------------

HUFF_DIGITS = {"00000": "0", "00001": "1", "00010": "2", "011001": "3", "011010": "4",
               "011011": "5", "011100": "6", "011101": "7", "011110": "8", "011111": "9"}
STATIC_STATUS = {8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404, 14: 500}


def hpack_int(value, prefix_bits, first):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_literal(name, value):
    n, v = name.encode(), value.encode()
    return b"\x00" + hpack_int(len(n), 7, 0) + n + hpack_int(len(v), 7, 0) + v


def decode_status(block):
    i = 0
    while i < len(block) and (block[i] & 0xE0) == 0x20:  # dynamic table size updates
        i += 1
    if i >= len(block):
        return None
    b = block[i]
    if b & 0x80:
        return STATIC_STATUS.get(b & 0x7F)
    if b in (0x48, 0x08, 0x18):  # literal, name :status (static index 8)
        ln = block[i + 1]
        raw = block[i + 2:i + 2 + (ln & 0x7F)]
        if not ln & 0x80:
            return int(raw.decode())
        bits = "".join(format(x, "08b") for x in raw)
        out, cur = "", ""
        for bit in bits:
            cur += bit
            if cur in HUFF_DIGITS:
                out += HUFF_DIGITS[cur]
                cur = ""
            if len(out) == 3:
                break
        return int(out) if len(out) == 3 else None
    return None


class H2Stream:
    def __init__(self):
        self.resp = Resp()
        self.blocks = 0
        self.event = asyncio.Event()
        self.data_seen = asyncio.Event()
        self.reset = False


class H2Conn:
    def __init__(self, reader, writer, slow=False, stuck=False):
        self.reader, self.writer, self.slow, self.stuck = reader, writer, slow, stuck
        self.streams = {}
        self.next_id = 1
        self.dead = False
        self.task = asyncio.get_running_loop().create_task(self.read_loop())

    @staticmethod
    async def open(port, slow=False, stuck=False):
        """A connection; a `slow` one reads like a slow client: a 4 KiB stream window and each
        WINDOW_UPDATE sent a few ms after the data it acknowledges; a `stuck` one has that window
        and never opens it again (a client that stopped reading)."""
        slow = slow or stuck
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
        writer.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        # SETTINGS: HEADER_TABLE_SIZE 0, ENABLE_PUSH 0, INITIAL_WINDOW_SIZE.
        window = 4096 if slow else 1 << 20
        settings = struct.pack(">HI", 1, 0) + struct.pack(">HI", 2, 0) + struct.pack(">HI", 4, window)
        c = H2Conn(reader, writer, slow, stuck)
        c.frame(4, 0, 0, settings)
        if not slow:
            c.frame(8, 0, 0, struct.pack(">I", (1 << 30)))
        return c

    def frame(self, ftype, flags, sid, payload):
        self.writer.write(struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) +
                          struct.pack(">I", sid) + payload)

    def request(self, rid, fault, stream, port):
        sid = self.next_id
        self.next_id += 2
        st = H2Stream()
        self.streams[sid] = st
        body = json.dumps({"model": "soak", "messages": [{"role": "user", "content": "hi"}],
                           "stream": stream, "max_tokens": 4096}).encode()
        block = b"".join(hpack_literal(k, v) for k, v in (
            (":method", "POST"), (":scheme", "http"), (":authority", "127.0.0.1:%d" % port),
            (":path", "/v1/chat/completions"), ("content-type", "application/json"),
            ("content-length", str(len(body))), ("x-request-id", rid), ("x-soak-fault", fault)))
        self.frame(1, 0x4, sid, block)
        self.frame(0, 0x1, sid, body)
        return sid, st

    def rst(self, sid):
        self.frame(3, 0, sid, struct.pack(">I", 8))  # CANCEL
        st = self.streams.pop(sid, None)
        if st:
            st.reset = True
            st.event.set()

    async def read_loop(self):
        try:
            while True:
                h = await self.reader.readexactly(9)
                length = struct.unpack(">I", b"\0" + h[:3])[0]
                ftype, flags = h[3], h[4]
                sid = struct.unpack(">I", h[5:9])[0] & 0x7FFFFFFF
                payload = await self.reader.readexactly(length)
                st = self.streams.get(sid)
                if ftype == 0:  # DATA
                    data = payload
                    if flags & 0x8:
                        data = payload[1:len(payload) - payload[0]]
                    if st:
                        st.resp.body += data
                        st.data_seen.set()
                    if length and not self.stuck:
                        if self.slow:
                            await asyncio.sleep(SLOW_READ_DELAY_S)
                        self.frame(8, 0, 0, struct.pack(">I", length))
                        if st and not flags & 0x1:
                            self.frame(8, 0, sid, struct.pack(">I", length))
                    if st and flags & 0x1:
                        st.resp.complete = True
                        st.event.set()
                        del self.streams[sid]
                elif ftype in (1, 9):  # HEADERS / CONTINUATION
                    block = payload
                    if ftype == 1:
                        pad = payload[0] if flags & 0x8 else 0
                        start = 1 if flags & 0x8 else 0
                        if flags & 0x20:
                            start += 5
                        block = payload[start:len(payload) - pad]
                    if st:
                        if st.blocks == 0:
                            st.resp.status = decode_status(block)
                        else:
                            st.resp.trailers["present"] = "1"
                        st.blocks += 1
                        if flags & 0x1:
                            st.resp.complete = True
                            st.event.set()
                            del self.streams[sid]
                elif ftype == 3:  # RST_STREAM
                    if st:
                        st.reset = True
                        st.event.set()
                        del self.streams[sid]
                elif ftype == 4 and not flags & 0x1:
                    self.frame(4, 0x1, 0, b"")
                elif ftype == 6 and not flags & 0x1:
                    self.frame(6, 0x1, 0, payload)
                elif ftype == 7:  # GOAWAY
                    self.dead = True
                await self.writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            self.dead = True
            for st in self.streams.values():
                st.event.set()
            self.streams.clear()

    def close(self):
        self.dead = True
        self.task.cancel()
        self.writer.transport.abort()


# --------------------------------------------------------------------------------------------
# The plan: what each stream does and the cause it must end with.
# --------------------------------------------------------------------------------------------

EXPECT = {
    "ok": "eos", "big": "eos", "trickle": "eos", "extra_bytes": "eos", "long": "client_cancel",
    "drop": "upstream_disconnect", "half_close": "upstream_disconnect",
    "rst": "upstream_disconnect", "drop_head": "upstream_disconnect",
    "s500_cut": "upstream_disconnect", "partial_head": "gateway_ttft_timeout",
    "long_cl": "upstream_disconnect", "short_cl": "upstream_disconnect",
    "stall": "gateway_idle_timeout", "stall0": "gateway_ttft_timeout",
    "s500": "upstream_error", "error_event": "upstream_error", "garbage": "upstream_error",
    # client behaviours that decide the cause themselves
    "cancel_early": "client_cancel", "reset_early": "client_cancel",
    "stuck": "gateway_idle_timeout",
}
# An HTTP/2 stream reset right after its request may be reset before the gateway dispatched it:
# then it never had a response, and no record is the right answer (one, when it had started).
OPTIONAL = {"reset_early"}
# Upstream faults any client behaviour may meet (weights).
FAULTS = [("ok", 30), ("drop", 8), ("half_close", 6), ("stall", 3), ("stall0", 2), ("s500", 8),
          ("rst", 4), ("drop_head", 3), ("s500_cut", 3), ("partial_head", 2),
          ("error_event", 8), ("garbage", 8), ("trickle", 8), ("long_cl", 5), ("short_cl", 5),
          ("extra_bytes", 4)]


def pick_fault(rng):
    names, weights = zip(*FAULTS)
    name = rng.choices(names, weights)[0]
    k = rng.randint(1, 6)
    return "%s:%d" % (name, k), name


class Plan:
    """One unit of client work: one or more requests, each (request id, fault, expected cause)."""

    def __init__(self, kind, transport, requests, stream=True):
        self.kind, self.transport, self.requests, self.stream = kind, transport, requests, stream


SLOW_READ_DELAY_S = 0.003  # a slow HTTP/2 reader's delay before each WINDOW_UPDATE
H2_ONLY = False
ONLY = None  # --only KIND: every unit is that client behaviour (slow, stuck, cancel, ...)


def make_plan(rng, seq):
    if ONLY:
        for _ in range(1000):
            p = make_plan_any(rng, seq)
            if p.kind == ONLY:
                return p
    return make_plan_any(rng, seq)


def make_plan_any(rng, seq):
    rid = lambda i: "soak-%d-%d" % (seq, i)
    r = rng.random()
    h2 = rng.random() < 0.4 or H2_ONLY
    transport = "h2" if h2 else "h1"
    if r < 0.08:  # the client cancels mid-stream (HTTP/1.1: close; HTTP/2: RST_STREAM)
        return Plan("cancel", transport, [(rid(0), "long:0", "long")])
    if r < 0.11:  # ... before the answer began (the upstream has not sent its head)
        return Plan("cancel_early", transport,
                    [(rid(0), "stall0:0", "reset_early" if h2 else "cancel_early")])
    if r < 0.15:  # a slow reader (small receive buffer or window, slow reads): back-pressure
        return Plan("slow", transport, [(rid(0), "big:0", "big")])
    if r < 0.16 and h2:  # a reader that stops reading (its window stays shut): the idle timeout
        return Plan("stuck", transport, [(rid(0), "big:0", "stuck")])
    if r < 0.26 and not h2:  # pipelining: 2-3 requests in one write
        reqs = []
        for i in range(rng.randint(2, 3)):
            fault, name = pick_fault(rng)
            reqs.append((rid(i), fault, name))
        return Plan("pipeline", transport, reqs)
    if r < 0.32:  # not streamed
        name = rng.choice(["ok", "s500", "drop"])
        return Plan("unary", transport, [(rid(0), "%s:3" % name, name)], stream=False)
    fault, name = pick_fault(rng)
    return Plan("plain", transport, [(rid(0), fault, name)])


# --------------------------------------------------------------------------------------------
# Checks on what the client read
# --------------------------------------------------------------------------------------------

RECORD_RE = re.compile(rb'"cutline":\{"v":1,"cause":"([a-z_]+)"')


def check_response(resp, expected, stream, transport, problems, rid):
    if not resp.complete:
        problems.append("%s: response not complete" % rid)
        return
    records = RECORD_RE.findall(resp.body)
    if resp.status == 200 or resp.status is None and stream:
        if len(records) != 1 or records[0].decode() != expected:
            problems.append("%s: expected one record %s in the body, got %s (status %s)" %
                            (rid, expected, records, resp.status))
        if stream and resp.body.count(b"data: [DONE]") > 1:
            problems.append("%s: more than one [DONE]" % rid)
    else:
        if records and records[0].decode() != expected:
            problems.append("%s: body record %s, expected %s" % (rid, records, expected))
        if transport == "h1":
            hdr = resp.headers.get("cutline-stop", "")
            if ('cause=%s;' % expected) not in hdr:
                problems.append("%s: Cutline-Stop header %r, expected %s" % (rid, hdr, expected))
    if transport == "h1" and stream and resp.status == 200:
        if ('cause=%s;' % expected) not in resp.trailers.get("cutline-stop", ""):
            problems.append("%s: trailer %r, expected %s" % (rid, resp.trailers, expected))


# --------------------------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------------------------

class H2Pool:
    """A few HTTP/2 connections, each carrying up to `per_conn` streams at once."""

    def __init__(self, port, per_conn=8):
        self.port, self.per_conn = port, per_conn
        self.conns = []
        self.retired = []
        self.lock = asyncio.Lock()

    async def get(self):
        async with self.lock:
            # A connection that used up its stream ids is retired (closed at the end: its last
            # streams may still run); a dead one is closed now.
            for c in self.conns:
                if c.dead:
                    c.close()
                elif c.next_id >= 20001:
                    self.retired.append(c)
            self.conns = [c for c in self.conns if not c.dead and c.next_id < 20001]
            for c in self.conns:
                if len(c.streams) < self.per_conn:
                    return c
            c = await H2Conn.open(self.port)
            self.conns.append(c)
            return c

    def close(self):
        for c in self.conns + self.retired:
            c.close()


async def run_plan(plan, port, h2pool, problems, stats):
    if plan.transport == "h2":
        if plan.kind in ("slow", "stuck"):
            conn = await H2Conn.open(port, slow=True, stuck=plan.kind == "stuck")
        else:
            conn = await h2pool.get()
        rid, fault, name = plan.requests[0]
        sid, st = conn.request(rid, fault, plan.stream, port)
        await conn.writer.drain()
        if plan.kind == "stuck":
            await asyncio.sleep(1.6)  # past the idle timeout (1 s), never reading
            conn.close()
            return
        if plan.kind == "cancel_early":
            await asyncio.sleep(random.random() * 0.05)
            conn.rst(sid)
            await conn.writer.drain()
            return
        if plan.kind == "cancel":
            try:
                await asyncio.wait_for(st.data_seen.wait(), 10)
            except asyncio.TimeoutError:
                problems.append("%s: no data before the reset" % rid)
            await asyncio.sleep(0.01)
            conn.rst(sid)
            await conn.writer.drain()
            return
        try:
            await asyncio.wait_for(st.event.wait(), 30)
        except asyncio.TimeoutError:
            problems.append("%s: h2 stream did not end" % rid)
            return
        if plan.kind == "slow":
            conn.close()
        if st.reset:
            problems.append("%s: h2 stream reset by the gateway" % rid)
            return
        check_response(st.resp, EXPECT[name], plan.stream, "h2", problems, rid)
        return
    reader, writer = await h1_open(port, rcvbuf=4096 if plan.kind == "slow" else 0)
    try:
        if plan.kind == "cancel":
            rid, fault, name = plan.requests[0]
            writer.write(h1_request(rid, fault, True, port))
            await writer.drain()
            await asyncio.wait_for(reader.readuntil(b"data: "), 10)
            await asyncio.sleep(0.01)
            return
        if plan.kind == "cancel_early":
            writer.write(h1_request(plan.requests[0][0], plan.requests[0][1], True, port))
            await writer.drain()
            await asyncio.sleep(0.05)
            return
        writer.write(b"".join(h1_request(rid, f, plan.stream, port) for rid, f, _ in plan.requests))
        await writer.drain()
        for rid, fault, name in plan.requests:
            try:
                resp = await asyncio.wait_for(h1_read_response(reader, slow=plan.kind == "slow"), 30)
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError,
                    ValueError) as e:
                problems.append("%s (%s, %s): read failed: %r" % (rid, plan.kind, fault, e))
                return
            check_response(resp, EXPECT[name], plan.stream, "h1", problems, rid)
    finally:
        writer.transport.abort()


def proc_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def proc_sockets(pid):
    """The gateway's TCP sockets: 'local_port->remote_port STATE' (for a descriptor report)."""
    states = {"01": "ESTABLISHED", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
              "0A": "LISTEN", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "09": "LAST_ACK"}
    by_inode = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                for line in list(f)[1:]:
                    cols = line.split()
                    local, remote = int(cols[1].split(":")[1], 16), int(cols[2].split(":")[1], 16)
                    by_inode[cols[9]] = "%d->%d %s" % (local, remote, states.get(cols[3], cols[3]))
        except OSError:
            pass
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        m = re.match(r"socket:\[(\d+)\]", target)
        if m:
            out.append(by_inode.get(m.group(1), "socket " + m.group(1)))
    return sorted(out)


def proc_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def http_get(port, path):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" % path.encode())
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    if b"chunked" in head.lower():
        out, rest = b"", body
        while rest:
            line, _, rest = rest.partition(b"\r\n")
            n = int(line.split(b";")[0], 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    return body.decode()


def stops_by_cause(metrics_text):
    out = collections.Counter()
    for line in metrics_text.splitlines():
        if line.startswith("cutline_stops_total{"):
            m = re.search(r'cause="([a-z_]+)"', line)
            out[m.group(1)] += int(float(line.rsplit(" ", 1)[1]))
    return out


def gauge(metrics_text, name):
    for line in metrics_text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def policy_yaml(upstream_port, log_path, idle_ms=1000):
    return """listen:
  - address: 127.0.0.1:0
admin:
  address: 127.0.0.1:0
access_log: %s
upstreams:
  - name: chaos
    url: http://127.0.0.1:%d
    models: ["soak"]
policies:
  - name: soak
    match: {}
    ttft_timeout: 1200ms
    idle_timeout: %dms
    deadline: 20s
    budget: {max_output_tokens: 4096, global_tokens_per_minute: 1000000000}
""" % (log_path, upstream_port, idle_ms)


def wait_for(cond, timeout_s):
    end = time.time() + timeout_s
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


async def drive(plans, port, admin_port, concurrency, progress):
    problems = []
    stats = collections.Counter()
    h2pool = H2Pool(port)
    queue = collections.deque(plans)
    done = [0]

    async def worker():
        while queue:
            plan = queue.popleft()
            try:
                await run_plan(plan, port, h2pool, problems, stats)
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError,
                    OSError) as e:
                problems.append("%s (%s/%s): %r" % (plan.requests[0][0], plan.kind,
                                                    plan.transport, e))
            done[0] += 1
            if progress and done[0] % 10000 == 0:
                print("  %d units done" % done[0], flush=True)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    h2pool.close()
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", nargs="?", default="soak")
    ap.add_argument("--gateway")
    ap.add_argument("--streams", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=48)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="keep the work directory here")
    ap.add_argument("--json", help="write the figures as JSON to this file")
    ap.add_argument("--only", help="one client behaviour only (slow, stuck, cancel, pipeline...)")
    ap.add_argument("--h2-only", action="store_true", help="HTTP/2 clients only")
    ap.add_argument("--idle-ms", type=int, default=1000, help="the policy's idle timeout")
    ap.add_argument("--slow-delay-ms", type=float, default=3,
                    help="a slow HTTP/2 reader's delay before each WINDOW_UPDATE")
    args = ap.parse_args()
    global ONLY, SLOW_READ_DELAY_S, H2_ONLY
    ONLY, SLOW_READ_DELAY_S, H2_ONLY = args.only, args.slow_delay_ms / 1000.0, args.h2_only
    if args.mode == "upstream":
        asyncio.run(upstream_main())
        return 0
    if not args.gateway or not os.access(args.gateway, os.X_OK):
        print("soak: --gateway BIN (the cutline-gateway binary) is required", file=sys.stderr)
        return 2
    work = args.keep or tempfile.mkdtemp(prefix="cutline-soak-")
    os.makedirs(work, exist_ok=True)
    up = subprocess.Popen([sys.executable, os.path.abspath(__file__), "upstream"],
                          stdout=subprocess.PIPE, stderr=open(os.path.join(work, "upstream.err"), "w"))
    gw = None
    cleanup_dir = None
    try:
        line = up.stdout.readline().decode()
        if not line.startswith("PORT "):
            print("soak: the chaotic upstream did not start", file=sys.stderr)
            return 1
        up_port = int(line.split()[1])
        log_path = os.path.join(work, "access.log")
        cfg = os.path.join(work, "cutline.yaml")
        with open(cfg, "w") as f:
            f.write(policy_yaml(up_port, log_path, args.idle_ms))
        ready = os.path.join(work, "ready.json")
        for stale in (ready, log_path):
            if os.path.exists(stale):
                os.unlink(stale)
        gw = subprocess.Popen([args.gateway, "--config", cfg, "--ready-file", ready],
                              stdout=open(os.path.join(work, "gateway.out"), "w"),
                              stderr=open(os.path.join(work, "gateway.err"), "w"))
        if not wait_for(lambda: os.path.exists(ready) and os.path.getsize(ready) > 0, 10):
            print("soak: gateway did not start: " + open(os.path.join(work, "gateway.err")).read(),
                  file=sys.stderr)
            return 1
        ports = [int(p) for p in re.findall(r":(\d+)", open(ready).read())]
        port, admin_port = ports[0], ports[-1]

        rng = random.Random(args.seed)
        # Warm-up (not counted in the figures): the allocator and the pools reach their working
        # size, so "idle level" means idle after work, as a long-running gateway is.
        fds_cold = proc_fds(gw.pid)
        warm_plans = []
        n_warm = 0
        while n_warm < min(500, args.streams // 4 + 50):
            p = make_plan(rng, -1 - len(warm_plans))
            warm_plans.append(p)
            n_warm += len(p.requests)
        asyncio.run(drive(warm_plans, port, admin_port, args.concurrency, False))
        wait_for(lambda: proc_fds(gw.pid) <= fds_cold, 5)
        time.sleep(0.5)
        fds_idle, rss_idle = proc_fds(gw.pid), proc_rss_kib(gw.pid)
        sockets_idle = proc_sockets(gw.pid)
        m_before = http_get(admin_port, "/metrics")
        stops_before = stops_by_cause(m_before)
        log_lines_before = sum(1 for _ in open(log_path))

        plans, n = [], 0
        while n < args.streams:
            p = make_plan(rng, len(plans))
            plans.append(p)
            n += len(p.requests)
        expected = {}
        for p in plans:
            for rid, fault, name in p.requests:
                expected[rid] = (EXPECT[name], p.kind, p.transport, fault, name in OPTIONAL)
        print("soak: %d streams (%d client units), concurrency %d, seed %d" %
              (n, len(plans), args.concurrency, args.seed), flush=True)
        t0 = time.time()
        problems = asyncio.run(drive(plans, port, admin_port, args.concurrency, True))
        elapsed = time.time() - t0

        # Every stream must have its log line; then let the gateway go idle.
        def log_ids():
            ids = collections.Counter()
            with open(log_path) as f:
                for line in f:
                    m = re.search(r'"request_id":"(soak-\d+-\d+)"', line)
                    if m:
                        ids[m.group(1)] += 1
            return ids

        required = [rid for rid, v in expected.items() if not v[4]]
        wait_for(lambda: all(rid in ids for ids in [log_ids()] for rid in required), 15)
        settled = wait_for(lambda: proc_fds(gw.pid) <= fds_idle, 15)
        time.sleep(0.5)
        fds_after, rss_after = proc_fds(gw.pid), proc_rss_kib(gw.pid)
        m_after = http_get(admin_port, "/metrics")

        by_cause = collections.Counter(v[0] for v in expected.values())
        logged = collections.Counter()
        with open(log_path) as f:
            for i, line in enumerate(f):
                if i < log_lines_before:
                    continue
                rec = json.loads(line)
                rid = rec.get("request_id", "")
                if rid not in expected:
                    problems.append("log line for an unknown request: %s" % line.strip()[:200])
                    continue
                logged[rid] += 1
                want = expected[rid]
                if rec.get("cause") != want[0]:
                    problems.append("%s (%s/%s, fault %s): logged cause %s (status %s, %s), "
                                    "expected %s" % (rid, want[1], want[2], want[3],
                                                     rec.get("cause"), rec.get("status"),
                                                     rec.get("message", "")[:120], want[0]))
        undispatched = 0
        for rid in expected:
            if expected[rid][4] and logged[rid] == 0:
                by_cause[expected[rid][0]] -= 1  # reset before dispatch: no response, no record
                undispatched += 1
                continue
            if logged[rid] != 1:
                problems.append("%s (%s/%s, fault %s): %d log lines, expected 1" %
                                (rid, expected[rid][1], expected[rid][2], expected[rid][3],
                                 logged[rid]))
        stops_after = stops_by_cause(m_after)
        delta = {c: stops_after[c] - stops_before[c] for c in set(stops_after) | set(stops_before)}
        delta = {c: v for c, v in delta.items() if v}
        if delta != dict(by_cause):
            problems.append("cutline_stops_total rose by %s, injected %s" %
                            (sorted(delta.items()), sorted(by_cause.items())))
        reserved = gauge(m_after, "cutline_pool_reserved_tokens")
        if reserved is None:
            problems.append("/metrics has no cutline_pool_reserved_tokens")
        elif reserved != 0:
            problems.append("%d tokens still reserved after the run (a reservation leaked)" %
                            reserved)
        if not settled:
            problems.append("descriptors: %d after the run, %d idle before; sockets before %s, "
                            "after %s (upstream port %d, gateway port %d)" %
                            (fds_after, fds_idle, sockets_idle, proc_sockets(gw.pid), up_port,
                             port))
        rss_limit = rss_idle + max(16 * 1024, rss_idle // 4)
        # Under AddressSanitizer freed memory waits in its quarantine, so resident memory does
        # not return to idle; LeakSanitizer checks for leaks at the gateway's exit instead.
        if "ASAN_OPTIONS" not in os.environ and rss_after > rss_limit:
            problems.append("resident memory %d KiB after the run, %d KiB idle before (limit %d)"
                            % (rss_after, rss_idle, rss_limit))
        if gw.poll() is not None:
            problems.append("the gateway exited (status %s)" % gw.returncode)

        figures = {
            "streams": len(expected), "seconds": round(elapsed, 1),
            "streams_per_s": round(len(expected) / elapsed, 1),
            "by_cause": dict(sorted(by_cause.items())),
            "h2_reset_before_dispatch": undispatched,
            "by_behaviour": dict(collections.Counter(p.kind + "/" + p.transport for p in plans)),
            "fds_idle": fds_idle, "fds_after": fds_after,
            "rss_idle_kib": rss_idle, "rss_after_kib": rss_after, "problems": len(problems),
        }
        print(json.dumps(figures, indent=1))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(figures, f, indent=1)
        with open(os.path.join(work, "problems.txt"), "w") as f:
            f.write("".join(p + "\n" for p in problems))
        for p in problems[:40]:
            print("PROBLEM: " + p)
        if len(problems) > 40:
            print("... and %d more" % (len(problems) - 40))
        if problems or args.keep:
            print("soak: %s (work dir %s)" % ("FAILED" if problems else "passed", work))
        else:
            print("soak: passed")
            cleanup_dir = work
        return 1 if problems else 0
    finally:
        if gw and gw.poll() is None:
            gw.send_signal(signal.SIGTERM)
            try:
                gw.wait(10)
            except subprocess.TimeoutExpired:
                gw.kill()
        up.kill()
        up.wait()
        if cleanup_dir:
            shutil.rmtree(cleanup_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
