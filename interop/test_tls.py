"""HTTPS on both listeners (`TLS`, `GatewayTLS`), end to end: a test CA made here, a token over
HTTPS with requests, an object up and down with boto3 verifying that CA, `aws:SecureTransport`,
plain HTTP refused on a TLS port, and certificates replaced on SIGHUP or by the file poll
while open connections keep theirs."""
import datetime
import http.client
import ipaddress
import json
import signal
import socket
import ssl
import subprocess
import time

import pytest
import requests
from botocore.exceptions import ClientError
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from conftest import ROOT_SECRET, Server, binary
from s3_helpers import ROOT_ACCESS_KEY_ID, error_of, issued_credentials, s3_client

TLS_FILES = {"TLS": {"CertificateFile": "tls/token.pem", "KeyFile": "tls/token.key"},
             "GatewayTLS": {"CertificateFile": "tls/gateway.pem", "KeyFile": "tls/gateway.key"}}

# Any object action on the bucket, only over TLS.
SECURE_ONLY_POLICY = {"Version": "1", "Statement": [{
    "Effect": "Allow", "Action": ["oss:PutObject", "oss:GetObject"], "Resource": ["acs:oss:*:*:$BUCKET_NAME/*"],
    "Condition": {"Bool": {"acs:SecureTransport": "true"}},
}]}


def name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class ScratchCA:
    """A throwaway certificate authority and the server certificates it signs for 127.0.0.1."""

    def __init__(self, directory):
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.certificate = (
            x509.CertificateBuilder().subject_name(name("Tollgate test CA")).issuer_name(name("Tollgate test CA"))
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256()))
        self.path = directory / "ca.pem"
        self.path.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))

    def issue(self, common_name: str) -> tuple:
        """(certificate PEM, key PEM, serial) of a server certificate for 127.0.0.1."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        serial = x509.random_serial_number()
        certificate = (
            x509.CertificateBuilder().subject_name(name(common_name)).issuer_name(self.certificate.subject)
            .public_key(key.public_key()).serial_number(serial)
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256()))
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        return certificate.public_bytes(serialization.Encoding.PEM), key_pem, serial

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.path))


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return ScratchCA(tmp_path_factory.mktemp("ca"))


def install(server: Server, ca: ScratchCA, listener: str, common_name: str) -> int:
    """Writes a fresh certificate and key for `listener` ("token" or "gateway"); its serial."""
    certificate, key, serial = ca.issue(common_name)
    replace(server, f"{listener}.pem", certificate)
    replace(server, f"{listener}.key", key)
    return serial


def replace(server: Server, file: str, content: bytes) -> None:
    """Replaces tls/FILE at once (by renaming), as an operator's deploy step would."""
    directory = server.dir / "tls"
    directory.mkdir(exist_ok=True)
    (directory / (file + ".new")).write_bytes(content)
    (directory / (file + ".new")).rename(directory / file)


def tls_server(ca: ScratchCA, **config) -> Server:
    server = Server({"AccessKeyID": ROOT_ACCESS_KEY_ID, "AccessKeySecret": ROOT_SECRET, **TLS_FILES, **config})
    install(server, ca, "token", "token-1")
    install(server, ca, "gateway", "gateway-1")
    return server


def with_secure_role(server: Server) -> Server:
    (server.dir / "policy" / "secure_only.txt").write_text(json.dumps(SECURE_ONLY_POLICY))
    return server


SECURE_ROLES = {"Roles": {"secure": "policy/secure_only.txt"}}


@pytest.fixture(scope="module")
def https(ca):
    server = with_secure_role(tls_server(ca, **SECURE_ROLES)).start()
    yield server
    server.cleanup()


def served_serial(port: int, ca: ScratchCA) -> int:
    """The serial of the certificate a new connection to `port` is given (verified against the CA)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ca.context().wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def test_a_token_over_https_and_an_object_up_and_down_with_it(https, ca):
    response = requests.get(https.url + "/", verify=str(ca.path), timeout=10)
    assert response.status_code == 200, response.text
    credentials = response.json()
    assert https.gateway_url.startswith("https://127.0.0.1:")
    client = s3_client(https, credentials, verify=str(ca.path))
    client.put_object(Bucket=https.bucket, Key="tls/hello.txt", Body=b"over TLS")
    assert client.get_object(Bucket=https.bucket, Key="tls/hello.txt")["Body"].read() == b"over TLS"
    # The token endpoint's admin and STS routes are on the same TLS listener.
    assert requests.get(https.url + "/healthz", verify=str(ca.path), timeout=10).json()["status"] == "ok"


def test_an_unknown_ca_is_refused_by_the_client(https):
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(https.url + "/healthz", timeout=10)


def test_expect_100_continue_is_answered_over_tls(https, ca):
    """botocore sends PutObject with `Expect: 100-continue` and waits up to a second for `100
    Continue`: the TLS handler sits below ExpectContinueHandler, so the interim answer comes."""
    client = s3_client(https, issued_credentials(https), verify=str(ca.path))
    client.put_object(Bucket=https.bucket, Key="tls/warm-up", Body=b"x")
    for attempt in range(3):
        started = time.monotonic()
        client.put_object(Bucket=https.bucket, Key="tls/timed", Body=b"y" * 4096)
        elapsed = time.monotonic() - started
        assert elapsed < 0.5, f"PUT took {elapsed:.2f} s (attempt {attempt}): no 100 Continue over TLS?"


@pytest.mark.parametrize("listener", ["token", "gateway"])
def test_plain_http_to_a_tls_port_fails_cleanly(https, ca, listener):
    port = https.port if listener == "token" else https.gateway_port
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    # The listener goes on serving HTTPS.
    assert served_serial(port, ca) > 0
    assert requests.get(https.url + "/healthz", verify=str(ca.path), timeout=10).status_code == 200


def test_secure_transport_allows_over_tls_and_denies_over_plain_http(https, ca):
    secure = s3_client(https, issued_credentials(https, "--role", "secure"), verify=str(ca.path))
    secure.put_object(Bucket=https.bucket, Key="secure/object", Body=b"encrypted in transit")
    assert secure.get_object(Bucket=https.bucket, Key="secure/object")["Body"].read() == b"encrypted in transit"

    plain = with_secure_role(Server({"AccessKeyID": ROOT_ACCESS_KEY_ID, "AccessKeySecret": ROOT_SECRET, **SECURE_ROLES})).start()
    try:
        client = s3_client(plain, issued_credentials(plain, "--role", "secure"))
        with pytest.raises(ClientError) as excinfo:
            client.put_object(Bucket=plain.bucket, Key="secure/object", Body=b"in the clear")
        assert error_of(excinfo) == ("AccessDenied", 403)
    finally:
        plain.cleanup()


def wait_for_serial(port: int, ca: ScratchCA, serial: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while (seen := served_serial(port, ca)) != serial:
        assert time.monotonic() < deadline, f"still serving serial {seen:x}, expected {serial:x}"
        time.sleep(0.2)


def wait_for_log(server: Server, since: int, text: str, timeout: float = 15) -> list:
    """The log lines after offset `since`, once one of them contains `text`."""
    deadline = time.monotonic() + timeout
    while text not in (log := server.output()[since:]):
        assert time.monotonic() < deadline, f"no {text!r} in the log:\n{server.output()}"
        time.sleep(0.1)
    return log.splitlines()


def test_replaced_certificates_serve_new_connections_and_keep_open_ones(ca):
    server = tls_server(ca).start()
    try:
        first = served_serial(server.port, ca)
        gateway_first = served_serial(server.gateway_port, ca)
        kept = http.client.HTTPSConnection("127.0.0.1", server.port, context=ca.context(), timeout=10)
        kept.request("GET", "/healthz")
        assert kept.getresponse().read() and kept.sock is not None
        kept_socket = kept.sock

        # SIGHUP: both listeners' replacements are taken at once.
        second = install(server, ca, "token", "token-2")
        gateway_second = install(server, ca, "gateway", "gateway-2")
        server.process.send_signal(signal.SIGHUP)
        wait_for_serial(server.port, ca, second)
        wait_for_serial(server.gateway_port, ca, gateway_second)
        assert gateway_second != gateway_first
        # The connection opened before keeps working, with the certificate it started with.
        kept.request("GET", "/healthz")
        response = kept.getresponse()
        assert response.status == 200 and json.loads(response.read())["status"] == "ok"
        assert kept.sock is kept_socket
        assert x509.load_der_x509_certificate(kept.sock.getpeercert(binary_form=True)).serial_number == first

        # No signal: the file poll notices the change.
        third = install(server, ca, "token", "token-3")
        wait_for_serial(server.port, ca, third)
        assert served_serial(server.gateway_port, ca) == gateway_second
        assert "tls.listener=token" in server.output() and "TLS certificate reloaded" in server.output()

        # A broken replacement (a certificate whose key is still the old one; then garbage) is
        # logged with its file and the certificate in force stays, on SIGHUP and on the poll.
        mark = len(server.output())
        certificate, _, _ = ca.issue("token-mismatch")
        replace(server, "token.pem", certificate)
        server.process.send_signal(signal.SIGHUP)
        lines = wait_for_log(server, mark, "does not match the certificate")
        refusal = next(line for line in lines if "does not match" in line)
        assert "TLS certificate reload refused" in refusal and "tls/token.key" in refusal and "tls.listener=token" in refusal
        assert served_serial(server.port, ca) == third
        mark = len(server.output())
        replace(server, "token.pem", b"-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n")
        lines = wait_for_log(server, mark, "not a PEM certificate")
        assert any("TLS certificate reload refused" in line and "tls/token.pem" in line for line in lines)
        assert served_serial(server.port, ca) == third
        assert requests.get(server.url + "/", verify=str(ca.path), timeout=10).status_code == 200
        kept.close()
    finally:
        server.cleanup()


@pytest.mark.parametrize("damage, message", [
    ("garbage", "tls/token.pem: not a PEM certificate"),
    ("mismatch", "tls/token.key: the private key does not match the certificate in"),
    ("missing", "tls/token.key: cannot read the file"),
])
def test_a_bad_certificate_at_start_is_a_config_error_naming_the_file(ca, damage, message):
    server = tls_server(ca)
    try:
        if damage == "garbage":
            (server.dir / "tls" / "token.pem").write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
        elif damage == "mismatch":
            _, other_key, _ = ca.issue("other")
            (server.dir / "tls" / "token.key").write_bytes(other_key)
        else:
            (server.dir / "tls" / "token.key").unlink()
        result = subprocess.run([binary(), "serve", "--config", str(server.config_path)], cwd=server.dir,
                                capture_output=True, text=True, timeout=30)
        assert result.returncode == 2, result.stdout + result.stderr
        assert message in result.stderr and result.stderr.count("\n") == 1, result.stderr
    finally:
        server.cleanup()


def test_the_cli_reaches_tls_listeners_on_this_machine(https):
    """`tollgate healthcheck` and `tollgate bucket` follow the config to HTTPS listeners."""
    health = https.cli("healthcheck")
    assert health.returncode == 0, health.stderr
    assert "https://127.0.0.1:" in health.stdout
    listed = https.cli("bucket", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert https.bucket in listed.stdout
    created = https.cli("bucket", "create", "made-over-tls")
    assert created.returncode == 0, created.stderr
    assert "made-over-tls" in https.cli("bucket", "list").stdout
