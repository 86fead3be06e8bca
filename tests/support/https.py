"""A local HTTPS server for documents a test publishes (client metadata documents), with a
CA of the test's own: real TLS, a certificate for localhost and 127.0.0.1, and the CA's PEM
for the service's ``client_documents_ca_bundle``."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

#: What a route answers: status, headers, body (bytes sent as they are).
Answer = tuple[int, dict[str, str], bytes]


@dataclass
class Publisher:
    """The running server: its base URL, the CA file to trust, and its routes."""

    base_url: str
    ca_file: Path
    routes: dict[str, Callable[[], Answer]] = field(default_factory=dict)
    #: Seconds to wait between body chunks of a route (a slow server).
    trickle: dict[str, float] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return self.base_url + path


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for localhost/127.0.0.1 it signed: (ca, cert, key)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "identityctl test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


@contextmanager
def https_publisher(directory: Path, *, port: int = 0) -> Iterator[Publisher]:
    """Serve ``Publisher.routes`` over HTTPS on 127.0.0.1 (``port``, else a free one) until
    the block ends."""
    ca_file, cert_file, key_file = _certificates(directory)
    publisher = Publisher(base_url="", ca_file=ca_file)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            route = publisher.routes.get(self.path)
            status, headers, body = route() if route else (404, {}, b"not found")
            self.send_response(status)
            for name, value in {"Content-Length": str(len(body)), **headers}.items():
                self.send_header(name, value)
            self.end_headers()
            pause = publisher.trickle.get(self.path, 0.0)
            for start in range(0, len(body), 16 if pause else len(body) or 1):
                if pause:
                    time.sleep(pause)
                try:
                    self.wfile.write(body[start:start + (16 if pause else len(body))])
                except OSError:  # the client gave up (a slow route's point)
                    return

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    publisher.base_url = f"https://localhost:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield publisher
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
