"""Certificates and keys for a test control plane: one CA, the serving cert, users, SA keys.

kube-apiserver authenticates the admin by a client certificate signed by ``--client-ca-file``
(the group ``system:masters`` is what kubeadm's admin.conf uses), serves TLS with a certificate
for 127.0.0.1 (and, for a real node, the node's address and the ``kubernetes`` Service's address
and names, which pods dial), and signs service-account tokens with an RSA key whose public half
it verifies them with. The node's components get client certificates of their own
(:func:`issue_client`): the kubelet as ``system:node:<name>`` in ``system:nodes``, the
scheduler, controller manager and kube-proxy as the users the API server's bootstrap RBAC
binds. The API server's aggregation layer proxies to extension API servers (KEDA's metrics server)
with the ``front-proxy-client`` certificate, which they trust through ``--requestheader-*``; an
extension or webhook server run by a test serves a certificate of :func:`issue_server`.
Everything is generated per test session; nothing is ever written into the repository.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

VALIDITY = datetime.timedelta(days=1)
#: The aggregation layer's client (kubeadm's name for it).
FRONT_PROXY_CLIENT = "front-proxy-client"
#: The names a pod reaches the API server by, through the ``kubernetes`` Service.
SERVICE_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class CertFiles:
    cert: Path
    key: Path


@dataclass(frozen=True)
class ControlPlanePki:
    ca: CertFiles
    serving: CertFiles
    admin: CertFiles
    service_account_key: Path
    service_account_public_key: Path
    #: The aggregation layer's client certificate (``--proxy-client-cert-file``), whose common
    #: name is the one ``--requestheader-allowed-names`` lets assert a user in headers.
    front_proxy: CertFiles


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(parts)


def _builder(subject: x509.Name, issuer: x509.Name, public_key: object) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)  # type: ignore[arg-type]
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


def _issue(
    directory: Path,
    stem: str,
    subject: x509.Name,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    usage: x509.ObjectIdentifier | Sequence[x509.ObjectIdentifier],
    san: list[x509.GeneralName] | None = None,
) -> CertFiles:
    key = _key()
    usages = [usage] if isinstance(usage, x509.ObjectIdentifier) else list(usage)
    builder = (
        _builder(subject, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    files = CertFiles(directory / f"{stem}.crt", directory / f"{stem}.key")
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(files.key, key)
    return files


def generate(directory: Path, addresses: Sequence[str] = ("127.0.0.1",)) -> ControlPlanePki:
    """A fresh CA and everything signed by it; ``addresses`` are the serving certificate's IPs."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name("roofline-test-ca")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca = CertFiles(directory / "ca.crt", directory / "ca.key")
    ca.cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(ca.key, ca_key)
    serving = _issue(
        directory,
        "apiserver",
        _name("kube-apiserver"),
        ca_cert,
        ca_key,
        x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
        [
            *(x509.IPAddress(ipaddress.ip_address(a)) for a in dict.fromkeys(addresses)),
            *(x509.DNSName(name) for name in ("localhost", *SERVICE_NAMES)),
        ],
    )
    admin = _issue(
        directory,
        "admin",
        _name("roofline-test-admin", "system:masters"),
        ca_cert,
        ca_key,
        x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH,
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_private = directory / "service-account.key"
    sa_public = directory / "service-account.pub"
    _write_key(sa_private, sa_key)
    sa_public.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    front_proxy = _issue(
        directory,
        FRONT_PROXY_CLIENT,
        _name(FRONT_PROXY_CLIENT),
        ca_cert,
        ca_key,
        x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH,
    )
    return ControlPlanePki(ca, serving, admin, sa_private, sa_public, front_proxy)


def _load_ca(ca: CertFiles) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    ca_key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    return ca_cert, ca_key


def issue_client(
    ca: CertFiles, directory: Path, stem: str, user: str, group: str | None = None
) -> CertFiles:
    """A client certificate for ``user`` (and ``group``) signed by the CA in ``ca``."""
    ca_cert, ca_key = _load_ca(ca)
    return _issue(
        directory,
        stem,
        _name(user, group),
        ca_cert,
        ca_key,
        x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH,
    )


def issue_server(
    ca: CertFiles,
    directory: Path,
    stem: str,
    addresses: Sequence[str],
    names: Sequence[str] = ("localhost",),
    *,
    client: bool = False,
) -> CertFiles:
    """A serving certificate for ``addresses`` and DNS ``names`` signed by the CA in ``ca`` (an
    extension API server the API server dials), with ``client`` valid as a client certificate
    too (both ends of a mutual TLS connection sharing one, as KEDA's operator and metrics server
    do)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = _load_ca(ca)
    usages = [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]
    if client:
        usages.append(x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH)
    return _issue(
        directory,
        stem,
        _name(names[0] if names else addresses[0]),
        ca_cert,
        ca_key,
        usages,
        [
            *(x509.IPAddress(ipaddress.ip_address(a)) for a in dict.fromkeys(addresses)),
            *(x509.DNSName(name) for name in dict.fromkeys(names)),
        ],
    )
