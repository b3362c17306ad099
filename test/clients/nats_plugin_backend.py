"""An external plugin backend in Python that speaks the NATS protocol itself (no NATS library), with a
`.creds` file issued by `POST /api/plugins/{id}/credentials` (docs/wire-contract.md, Connecting).

It is a client independent of the platform's code: it reads the credentials file as NATS defines it (a user
JWT and an nkey seed), signs the server's nonce with the seed (Ed25519, `cryptography`), upgrades to TLS
when the server asks for it, then
  - tries to subscribe to `<prefix>.rbac.>` and prints the server's refusal ("refused: ..."),
  - serves the plugin's route subject in its queue group: each request publishes the plugin's declared
    event to JetStream (acknowledgement read on its own inbox) and answers {"pong": true, "lang":
    "python", "stream": <the stream that stored the event>}.
It prints "ready" once the server accepted it.

Usage: nats_plugin_backend.py HOST:PORT CREDS SERVE QUEUE INBOX_PREFIX EVENT_SUBJECT PREFIX
         [CA_FILE CERT_FILE KEY_FILE SERVER_NAME]
"""

import base64
import json
import socket
import ssl
import sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def section(text, begin):
    start = text.index(begin)
    body = text[text.index("\n", start) + 1 :]
    return body[: body.index("-----")].strip()


def read_creds(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return section(text, "BEGIN NATS USER JWT"), section(text, "BEGIN USER NKEY SEED")


def signer(seed):
    # An nkey seed: base32 of two prefix bytes, the 32-byte Ed25519 seed and a CRC-16.
    raw = base64.b32decode(seed + "=" * (-len(seed) % 8))
    return Ed25519PrivateKey.from_private_bytes(raw[2:34])


class Connection:
    def __init__(self, address, tls):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.buffer = b""
        info = json.loads(self.line().split(b" ", 1)[1])
        if info.get("tls_required"):
            ca, cert, key, name = tls
            context = ssl.create_default_context(cafile=ca)
            context.load_cert_chain(cert, key)
            self.sock = context.wrap_socket(self.sock, server_hostname=name)
        self.info = info

    def send(self, data):
        self.sock.sendall(data)

    def fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk

    def line(self):
        while b"\r\n" not in self.buffer:
            self.fill()
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def take(self, n):
        while len(self.buffer) < n + 2:
            self.fill()
        data, self.buffer = self.buffer[:n], self.buffer[n + 2 :]
        return data


def main():
    address, creds, serve, queue, inbox, event, prefix = sys.argv[1:8]
    tls = sys.argv[8:12] if len(sys.argv) >= 12 else None
    jwt, seed = read_creds(creds)
    nc = Connection(address, tls)
    nonce = nc.info["nonce"].encode()
    sig = base64.urlsafe_b64encode(signer(seed).sign(nonce)).rstrip(b"=").decode()
    connect = {
        "verbose": False,
        "pedantic": False,
        "jwt": jwt,
        "sig": sig,
        "protocol": 1,
        "headers": True,
        "no_responders": True,
        "name": "python-plugin-backend",
        "lang": "python-raw",
        "version": "0",
    }
    nc.send(("CONNECT " + json.dumps(connect) + "\r\nPING\r\n").encode())
    answer = nc.line()
    if answer != b"PONG":
        print("connect refused: " + answer.decode(), flush=True)
        sys.exit(1)
    # Outside its subjects: the server refuses (and says so).
    nc.send(f"SUB {prefix}.rbac.> 1\r\nPING\r\n".encode())
    nc.send(f"SUB {serve} {queue} 2\r\nSUB {inbox}.> 3\r\nPING\r\n".encode())
    print("ready", flush=True)
    waiting = {}
    count = 0
    while True:
        line = nc.line().decode()
        if line == "PING":
            nc.send(b"PONG\r\n")
            continue
        if line.startswith("-ERR"):
            print("refused: " + line, flush=True)
            continue
        if not (line.startswith("MSG ") or line.startswith("HMSG ")):
            continue
        parts = line.split(" ")
        headered = parts[0] == "HMSG"
        size = int(parts[-1])
        reply = parts[3] if len(parts) == (6 if headered else 5) else None
        body = nc.take(size)
        if headered:
            header_size = int(parts[-2])
            body = body[header_size:]
        sid = parts[2]
        if sid == "2" and reply:
            # A route request: publish the declared event, answer once it is stored.
            count += 1
            ack_to = f"{inbox}.{count}"
            waiting[ack_to] = reply
            payload = json.dumps({"from": "python"}).encode()
            nc.send(f"PUB {event} {ack_to} {len(payload)}\r\n".encode() + payload + b"\r\n")
        elif sid == "3" and parts[1] in waiting:
            to = waiting.pop(parts[1])
            ack = json.loads(body)
            answer = json.dumps(
                {"status": 200, "body": {"pong": True, "lang": "python", "stream": ack.get("stream")}}
            ).encode()
            nc.send(f"PUB {to} {len(answer)}\r\n".encode() + answer + b"\r\n")


if __name__ == "__main__":
    main()
