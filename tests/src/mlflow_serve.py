"""A real MLflow tracking server for the tests (`stoker_tests::mlflow_server`), and a TLS door to it.

python3 mlflow_serve.py DIR PORT TLS_PORT WATCHED_PID

- writes DIR/ca.pem, a self-signed CA certificate (the CA the https client trusts), and
  DIR/server.pem with DIR/key.pem, the certificate it signs for 127.0.0.1 and localhost (made with
  `cryptography`, which mlflow depends on);
- starts `mlflow server` on 127.0.0.1:PORT (a SQLite store and the artifacts in DIR, served by the
  server: its default `--serve-artifacts`), in a session of its own;
- terminates TLS on 127.0.0.1:TLS_PORT with that certificate and forwards each connection to PORT;
- ends the server's whole session (SIGTERM, then SIGKILL) as soon as WATCHED_PID (the test binary)
  is gone, however it ended, removes DIR, and then ends itself.
"""

import asyncio
import datetime
import ipaddress
import os
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def make_certificate(folder):
    """A private CA (self-signed) and the door's certificate it signs: rustls, as webpki, refuses a
    CA certificate as a server's own (`CaUsedAsEndEntity`), which `openssl req -x509` makes."""
    now = datetime.datetime.now(datetime.timezone.utc)

    def certificate(subject, issuer, public_key, signing_key, is_ca):
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
        )
        if not is_ca:
            alt_names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
            builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        return builder.sign(signing_key, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = "stoker test CA"
    ca = certificate(ca_name, ca_name, ca_key.public_key(), ca_key, True)
    server = certificate("127.0.0.1", ca_name, key.public_key(), ca_key, False)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with open(os.path.join(folder, "key.pem"), "wb") as f:
        f.write(key_pem)
    with open(os.path.join(folder, "server.pem"), "wb") as f:
        f.write(server.public_bytes(serialization.Encoding.PEM))
    # ca.pem last: the test waits for it.
    tmp = os.path.join(folder, "ca.pem.tmp")
    with open(tmp, "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    os.rename(tmp, os.path.join(folder, "ca.pem"))


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


async def tls_door(folder, port, tls_port):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.path.join(folder, "server.pem"), os.path.join(folder, "key.pem"))

    async def forward(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))

    server = await asyncio.start_server(forward, "127.0.0.1", tls_port, ssl=context)
    async with server:
        await server.serve_forever()


def main():
    folder, port, tls_port, watched = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    make_certificate(folder)
    log = open(os.path.join(folder, "server.log"), "wb")
    server = subprocess.Popen(
        [
            sys.executable, "-m", "mlflow", "server",
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--backend-store-uri", "sqlite:///" + os.path.join(folder, "mlflow.db"),
            "--artifacts-destination", os.path.join(folder, "artifacts"),
        ],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )

    def watch():
        while True:
            try:
                os.kill(watched, 0)
            except ProcessLookupError:
                break
            if server.poll() is not None:
                break
            time.sleep(0.3)
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 0.0)):
            try:
                os.killpg(server.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.time() + wait
            while server.poll() is None and time.time() < deadline:
                time.sleep(0.1)
        shutil.rmtree(folder, ignore_errors=True)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
    asyncio.run(tls_door(folder, port, tls_port))


if __name__ == "__main__":
    main()
