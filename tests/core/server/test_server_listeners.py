"""Kafka's listeners syntax, TLS settings and the principals of non-SASL connections."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID
from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.core.cli import build_parser
from secmeta.core.cli.serve_cmd import server_config
from secmeta.core.server.listeners import (
    ClientAuth,
    Listener,
    ListenerError,
    SecurityProtocol,
    SslConfig,
    parse_advertised,
    parse_listeners,
    ssl_context,
)
from secmeta.core.server.principals import dn_rfc2253
from secmeta.events.types import ScramMechanism


def test_listeners_are_named_after_their_protocol():
    listeners = parse_listeners("PLAINTEXT://127.0.0.1:9092, SASL_SSL://0.0.0.0:9094,SSL://:0,SASL_PLAINTEXT://[::1]:9095")
    assert listeners == (
        Listener("PLAINTEXT", SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092),
        Listener("SASL_SSL", SecurityProtocol.SASL_SSL, "0.0.0.0", 9094),
        Listener("SSL", SecurityProtocol.SSL, "", 0),
        Listener("SASL_PLAINTEXT", SecurityProtocol.SASL_PLAINTEXT, "::1", 9095),
    )
    assert [(listener.protocol.tls, listener.protocol.sasl) for listener in listeners] == [
        (False, False), (True, True), (True, False), (False, True)]
    assert str(listeners[3]) == "SASL_PLAINTEXT://[::1]:9095"


@pytest.mark.parametrize("text, named", [
    ("", "listeners is empty"),
    ("PLAINTEXT://127.0.0.1:9092,", "empty entry"),
    ("HTTP://127.0.0.1:80", "HTTP is not a security protocol"),
    ("PLAINTEXT://127.0.0.1", "has no port"),
    ("PLAINTEXT://127.0.0.1:99999", "port '99999'"),
    ("PLAINTEXT://127.0.0.1:-1", "port '-1'"),
    ("PLAINTEXT://bad_host!:9092", "host 'bad_host!'"),
    ("PLAINTEXT://[nope]:9092", "host 'nope' is not an IPv6 address"),
    ("PLAINTEXT://a:1,PLAINTEXT://b:2", "listener PLAINTEXT is given twice"),
    ("PLAINTEXT://a:9092,SSL://b:9092", "port 9092 is used by another listener"),
    ("127.0.0.1:9092", "not of the form PROTOCOL://HOST:PORT"),
])
def test_bad_listeners_name_the_bad_part(text, named):
    with pytest.raises(ListenerError, match=named.replace("(", r"\(").replace(")", r"\)")):
        parse_listeners(text)


def test_advertised_listeners():
    listeners = parse_listeners("PLAINTEXT://0.0.0.0:9092,SSL://0.0.0.0:9093")
    assert parse_advertised("PLAINTEXT://broker.example.com:19092", listeners) == {
        "PLAINTEXT": ("broker.example.com", 19092)}
    assert parse_advertised(None, listeners) == {}
    with pytest.raises(ListenerError, match="there is no listener SASL_SSL"):
        parse_advertised("SASL_SSL://h:1", listeners)
    with pytest.raises(ListenerError, match="cannot connect to host '0.0.0.0'"):
        parse_advertised("SSL://0.0.0.0:1", listeners)


def test_ssl_settings_are_checked(tmp_path):
    with pytest.raises(ListenerError, match="--ssl-cert"):
        ssl_context(None)
    with pytest.raises(ListenerError, match="no such file"):
        ssl_context(SslConfig(str(tmp_path / "missing.pem")))
    with pytest.raises(ListenerError, match="not one of none, requested, required"):
        ClientAuth.parse("sometimes")


def test_client_auth_needs_a_ca(tmp_path):
    from tests.serverkit import make_ca

    ca = make_ca(tmp_path)
    assert ssl_context(ca.server_ssl("requested")).verify_mode.name == "CERT_OPTIONAL"
    assert ssl_context(ca.server_ssl("required")).verify_mode.name == "CERT_REQUIRED"
    with pytest.raises(ListenerError, match="needs --ssl-ca"):
        ssl_context(SslConfig(str(ca.server_cert), str(ca.server_key), None, ClientAuth.REQUIRED))


def test_subject_dn_is_printed_as_java_does():
    """X500Principal.getName(): last RDN first, RFC 2253 escapes, unknown attributes as OID=#hex(DER)."""
    name = x509.Name([
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc."),
        x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
        x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b"),
    ])
    assert dn_rfc2253(name) == r"1.2.840.113549.1.9.1=#1603614062,CN=alice,O=Acme\, Inc.,C=US"


def test_equals_and_hash_inside_a_value_are_escaped_as_java_does():
    """sun.security.x509.AVA.toRFC2253String, behind X500Principal.getName(), escapes every character of
    ``,=+<>#;"\\`` wherever it stands in a value ("this implementation also recognizes '=' and '#' as characters
    which need escaping"), not only a leading '#': Kafka names this client ``User:CN=ops\\=admin\\#1,O=acme``, and
    an ACL written for that principal must apply to the same certificate here."""
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "acme"),
                      x509.NameAttribute(NameOID.COMMON_NAME, "ops=admin#1")])
    assert dn_rfc2253(name) == r"CN=ops\=admin\#1,O=acme"


#: Values and the text Java's AVA.toRFC2253String gives them, worked out by hand from OpenJDK's source
#: (src/java.base/share/classes/sun/security/x509/AVA.java): ,=+<>#;"\ escaped wherever they stand, NUL as
#: \00, then every leading and trailing ' ' or '\r' escaped (a run of them, each); anything else as it is.
JAVA_ESCAPED = [
    ("ops=admin#1", r"ops\=admin\#1"),
    ("#lead", r"\#lead"),
    ('a,b+c<d>e;f"g\\h', r'a\,b\+c\<d\>e\;f\"g\\h'),
    (" one", r"\ one"),
    ("one ", "one\\ "),
    ("  two  ", "\\ \\ two\\ \\ "),
    ("in  side", "in  side"),
    ("\rcr\r", "\\\rcr\\\r"),
    ("   ", "\\ \\ \\ "),
    ("nul\0end", r"nul\00end"),
    ("tab\tnl\nx", "tab\tnl\nx"),
    ("caf\u00e9 \u20ac\U0001f600", "caf\u00e9 \u20ac\U0001f600"),
]


@pytest.mark.parametrize("value, text", JAVA_ESCAPED, ids=[repr(v) for v, _ in JAVA_ESCAPED])
def test_a_value_is_escaped_as_javas_ava_to_rfc2253_string_escapes_it(value, text):
    """Kafka's SSL principal is X500Principal.getName() (DefaultKafkaPrincipalBuilder, through
    SslPrincipalMapper's DEFAULT rule, which keeps it): each value as AVA.toRFC2253String writes it."""
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "acme"),
                      x509.NameAttribute(NameOID.COMMON_NAME, value)])
    assert dn_rfc2253(name) == f"CN={text},O=acme"


def test_unknown_attributes_in_a_multi_valued_rdn_keep_their_own_der():
    """Each unknown attribute of a multi-valued RDN is printed with its own DER value (tag UTF8String 0x0c
    for a UTF-8 value, as the certificate encodes it), and a long value gets a long-form DER length."""
    long_value = "x" * 200
    name = x509.Name([
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.COMMON_NAME, "svc"),
                                        x509.NameAttribute(x509.ObjectIdentifier("1.3.6.1.4.1.99999.1"), "ab"),
                                        x509.NameAttribute(x509.ObjectIdentifier("2.999.7"), long_value)]),
    ])
    parts = set(dn_rfc2253(name).split("+"))
    assert parts == {"CN=svc", "1.3.6.1.4.1.99999.1=#0c026162",
                     "2.999.7=#0c81c8" + long_value.encode().hex()}


def test_serve_command_line_builds_the_server_config():
    args = build_parser().parse_args([
        "serve", "--store", "s", "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "--advertised-listeners", "SASL_SSL://localhost:9094", "--sasl-mechanisms", "SCRAM-SHA-512",
        "--node-id", "7", "--socket-request-max-bytes", "4096", "--connections-max-idle-ms", "1000",
        "--max-connections", "5", "--ssl-cert", "c.pem", "--ssl-client-auth", "requested",
        "--max-connections-before-login-per-ip", "3", "--login-timeout-ms", "2000",
        "--connection-failed-authentication-delay-ms", "250", "--failed-authentications-max-pending", "9"])
    listeners, config = server_config(args)
    assert [listener.name for listener in listeners] == ["PLAINTEXT", "SASL_SSL"]
    assert config.advertised == {"SASL_SSL": ("localhost", 9094)}
    assert config.sasl_mechanisms == (ScramMechanism.SCRAM_SHA_512,)
    assert (config.node_id, config.socket_request_max_bytes, config.connections_max_idle_ms,
            config.max_connections) == (7, 4096, 1000, 5)
    assert (config.max_connections_before_login, config.max_connections_before_login_per_ip,
            config.login_timeout_ms, config.failed_authentication_delay_ms,
            config.failed_authentications_max_pending) == (1, 3, 2000, 250, 9)   # before login: 5 // 4
    assert config.ssl == SslConfig("c.pem", None, None, ClientAuth.REQUESTED)


def test_serve_rejects_mechanisms_it_cannot_offer():
    args = build_parser().parse_args(["serve", "--store", "s", "--listeners", "SASL_PLAINTEXT://127.0.0.1:0",
                                      "--sasl-mechanisms", "PLAIN"])
    with pytest.raises(ValueError, match="'PLAIN' is not SCRAM-SHA-256 or SCRAM-SHA-512"):
        server_config(args)


_JAVA_NAMES = """
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import javax.security.auth.x500.X500Principal;

public class JavaNames {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        HexFormat hex = HexFormat.of();
        for (String line; (line = in.readLine()) != null; ) {
            String name = new X500Principal(hex.parseHex(line)).getName();
            System.out.println(hex.formatHex(name.getBytes(StandardCharsets.UTF_8)));
            System.out.flush();
        }
    }
}
"""


@pytest.fixture(scope="module")
def java_names(tmp_path_factory):
    """``name(der) -> str``: X500Principal(der).getName() of a real JVM (the JDK Kafka runs on), one process."""
    import shutil
    import subprocess

    from tests.jvm import TEST_JVM_OPTIONS

    if shutil.which("java") is None:
        pytest.skip("no java on PATH")
    source = tmp_path_factory.mktemp("java-names") / "JavaNames.java"
    source.write_text(_JAVA_NAMES)
    process = subprocess.Popen(["java", *TEST_JVM_OPTIONS, str(source)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)

    def name(der: bytes) -> str:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(der.hex() + "\n")
        process.stdin.flush()
        return bytes.fromhex(process.stdout.readline().strip()).decode()

    yield name
    process.communicate()


_VALUE_CHARS = st.sampled_from([*',=+<>#;"\\', " ", "\r", "\0", "\t", "\n", "a", "Z", "0", "-", ".", "_", "@",
                                "\u00e9", "\u20ac", "\U0001f600"])
_KEYWORD_OIDS = st.sampled_from([NameOID.COMMON_NAME, NameOID.ORGANIZATION_NAME, NameOID.ORGANIZATIONAL_UNIT_NAME,
                                 NameOID.LOCALITY_NAME, NameOID.STATE_OR_PROVINCE_NAME, NameOID.STREET_ADDRESS,
                                 NameOID.USER_ID])
_ATTRIBUTES = st.builds(x509.NameAttribute, _KEYWORD_OIDS, st.text(_VALUE_CHARS, min_size=1, max_size=12))
_RDNS = st.lists(_ATTRIBUTES, min_size=1, max_size=3, unique_by=lambda a: (a.oid, a.value))
_NAMES = st.lists(_RDNS.map(x509.RelativeDistinguishedName), min_size=1, max_size=4).map(x509.Name)


def _as_read(name: x509.Name) -> x509.Name:
    """``name`` as read from DER, as a certificate's subject is (a multi-valued RDN in its DER order)."""
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from cryptography.hazmat.primitives.serialization import Encoding

    request = x509.CertificateSigningRequestBuilder().subject_name(name).sign(ed25519.Ed25519PrivateKey.generate(), None)
    return x509.load_der_x509_csr(request.public_bytes(Encoding.DER)).subject


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(name=_NAMES)
def test_a_subject_dn_with_special_characters_is_named_as_the_jvm_names_it(java_names, name):
    """Over subject names (multi-valued RDNs too) whose values mix every character Java escapes, or counts as
    leading or trailing whitespace, with others: secmeta's name is the one a real JVM's X500Principal.getName()
    gives for the same DER, which is Kafka's (DefaultKafkaPrincipalBuilder, SslPrincipalMapper's DEFAULT rule)."""
    subject = _as_read(name)
    assert dn_rfc2253(subject) == java_names(subject.public_bytes())
