#!/usr/bin/env python3
"""A minimal mooncake-go transfer client written from docs/protocol.md alone.

It is the proof that the protocol is simple enough for another language: the Go test
TestPythonClient runs it against a Go server. Usage: pyclient.py HOST:PORT CLUSTER_ID
"""
import socket
import struct
import sys

MAGIC = b"MCGO"
VERSION = 1
F_RESPONSE, F_ERROR = 1, 2
OP_PING, OP_LOOKUP, OP_WRITE, OP_READ, OP_READ_RANGE = 1, 13, 40, 42, 43
HDR = struct.Struct("<BBHIQQQ")  # op, flags, status, body_len, request_id, payload_len, checksum


class RemoteError(Exception):
    def __init__(self, code, msg, leader_id="", leader_addr=""):
        super().__init__(f"code {code}: {msg}")
        self.code, self.msg, self.leader_id, self.leader_addr = code, msg, leader_id, leader_addr


def s(b):  # str: u32 length + bytes
    return struct.pack("<I", len(b)) + b


class Reader:
    def __init__(self, b):
        self.b, self.o = b, 0

    def take(self, n):
        if self.o + n > len(self.b):
            raise ValueError("truncated body")
        v = self.b[self.o:self.o + n]
        self.o += n
        return v

    def u8(self):
        return self.take(1)[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def str(self):
        (n,) = struct.unpack("<I", self.take(4))
        return self.take(n)

    def done(self):
        if self.o != len(self.b):
            raise ValueError("trailing bytes")


class Conn:
    def __init__(self, addr, cluster_id):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        cid = cluster_id.encode()
        self.sock.sendall(MAGIC + struct.pack("<HHH", VERSION, 0, len(cid)) + cid)
        magic, version, status, n = struct.unpack("<4sHHH", self.recv(10))
        msg = self.recv(n).decode()
        if magic != MAGIC or status != 0 or version != VERSION:
            raise RemoteError(status, msg or f"version {version}")
        self.next_id = 0

    def recv(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed")
            buf += chunk
        return bytes(buf)

    def call(self, op, body=b"", payload=b""):
        self.next_id += 1
        rid = self.next_id
        self.sock.sendall(HDR.pack(op, 0, 0, len(body), rid, len(payload), 0) + body + payload)
        rop, flags, status, blen, got_id, plen, _ = HDR.unpack(self.recv(HDR.size))
        rbody, rpayload = self.recv(blen), self.recv(plen)
        if got_id != rid or rop != op or not flags & F_RESPONSE:
            raise ValueError("unexpected response frame")
        if flags & F_ERROR:
            r = Reader(rbody)
            msg, leader_id, leader_addr = r.str(), r.str(), r.str()
            raise RemoteError(status, msg.decode(), leader_id.decode(), leader_addr.decode())
        return rbody, rpayload

    def ping(self):
        self.call(OP_PING)

    def lookup(self, key, allow_stale=False):
        body, _ = self.call(OP_LOOKUP, s(key) + bytes([allow_stale]))
        r = Reader(body)
        version, size, checksum = r.u64(), r.u64(), r.u64()
        replicas = [(r.str().decode(), r.str().decode()) for _ in range(struct.unpack("<I", r.take(4))[0])]
        r.done()
        return version, size, checksum, replicas

    def write(self, key, version, data, checksum=0):
        body = (s(key) + struct.pack("<QQQ", version, len(data), 0) + bytes([0])
                + struct.pack("<q", 0) + bytes([0]) + struct.pack("<Q", checksum) + bytes([1]))
        self.call(OP_WRITE, body, data)

    def read(self, key, version=0, offset=0, length=0):
        op = OP_READ if offset == 0 and length == 0 else OP_READ_RANGE
        body, payload = self.call(op, s(key) + struct.pack("<QQQ", version, offset, length))
        r = Reader(body)
        got_version, size, checksum, tier = r.u64(), r.u64(), r.u64(), r.u8()
        r.done()
        return got_version, size, payload


def main():
    addr, cluster = sys.argv[1], sys.argv[2]
    c = Conn(addr, cluster)
    c.ping()
    data = bytes((i * 7) % 256 for i in range(100000))
    c.write(b"py/key", 5, data)
    version, size, payload = c.read(b"py/key", 5)
    assert (version, size, payload) == (5, len(data), data), "read back differs"
    _, _, part = c.read(b"py/key", 0, 10, 20)
    assert part == data[10:30], "range differs"
    try:
        c.lookup(b"py/missing")
        raise AssertionError("lookup of a missing key succeeded")
    except RemoteError as e:
        assert e.code == 4, e  # OBJECT_NOT_FOUND
    try:
        Conn(addr, cluster + "-other")
        raise AssertionError("wrong cluster accepted")
    except RemoteError as e:
        assert e.code == 16, e  # CLUSTER_ID_MISMATCH
    print("ok")


if __name__ == "__main__":
    main()
