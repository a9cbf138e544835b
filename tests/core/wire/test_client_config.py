"""Client settings (secmeta.core.wire.client_config): Kafka client properties from a --command-config file.

The file format is java.util.Properties.load's; the keys are Kafka's client configs
(CommonClientConfigs, SaslConfigs, SslConfigs) and librdkafka's ssl.*.location names;
sasl.jaas.config is read as Kafka's JaasConfig reads a ScramLoginModule entry.
"""

from __future__ import annotations

import pytest

from secmeta.core.wire.client_config import (
    ClientConfig,
    ClientConfigError,
    load_properties,
    parse_jaas_config,
    parse_properties,
)

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cr=t;x";'


def test_properties_separators_comments_and_continuations():
    """key=value, key: value and key value; # and ! comments; backslash continuations and escapes."""
    text = "# comment\n! also\n a = 1\nb: 2\nc 3\nd=one\\\n    two\ne=tab\\tx\\u0041\n\nf=\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "onetwo", "e": "tab\txA", "f": ""}


def test_jaas_options_of_the_scram_login_module():
    """username, password (quoted, with '=' and ';' inside) and tokenauth come out of the JAAS entry."""
    assert parse_jaas_config(JAAS) == {"username": "alice", "password": "s3cr=t;x"}
    token = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="tok" password="aGk=" tokenauth=true;'
    assert parse_jaas_config(token)["tokenauth"] == "true"


def test_jaas_with_another_login_module_is_refused_without_quoting_secrets():
    """A PLAIN or OAuth login module is refused; the error never quotes the password."""
    text = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="hunter2";'
    with pytest.raises(ClientConfigError) as info:
        parse_jaas_config(text)
    assert "hunter2" not in str(info.value)


def test_sasl_ssl_settings_from_a_file(tmp_path):
    """A SASL_SSL file with sasl.jaas.config gives user, password, mechanism and the CA; --bootstrap-server wins."""
    path = tmp_path / "client.properties"
    path.write_text("bootstrap.servers=other:1\nsecurity.protocol=sasl_ssl\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"sasl.jaas.config={JAAS}\nssl.ca.location=/tmp/ca.pem\n")
    config = ClientConfig.load("127.0.0.1:9094", path)
    assert config.bootstrap_servers == ("127.0.0.1:9094",)
    assert (config.security_protocol, config.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (config.sasl_username, config.sasl_password) == ("alice", "s3cr=t;x")
    assert config.ssl_ca_location == "/tmp/ca.pem" and config.ssl_check_hostname
    assert config.uses_sasl and config.uses_tls and not config.token_auth
    assert "s3cr=t;x" not in repr(config)


def test_librdkafka_style_username_and_password():
    """sasl.username / sasl.password (librdkafka's names) work as well as the JAAS entry."""
    config = ClientConfig.from_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                                           "sasl.username": "bob", "sasl.password": "pw"}, bootstrap_servers="h:1")
    assert (config.sasl_username, config.sasl_password, config.uses_tls) == ("bob", "pw", False)


def test_defaults_are_plaintext_with_kafka_timeouts():
    """No file: PLAINTEXT, request.timeout.ms 30 s, socket.connection.setup.timeout.ms 10 s."""
    config = ClientConfig.load("localhost:9092")
    assert config.security_protocol == "PLAINTEXT" and not config.uses_sasl
    assert (config.request_timeout_s, config.connect_timeout_s) == (30.0, 10.0)


@pytest.mark.parametrize("props, message", [
    ({}, "no broker given"),
    ({"bootstrap.servers": "nohostport"}, "bad broker address"),
    ({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL"}, "needs sasl.mechanism"),
    ({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "unsupported sasl.mechanism"),
    ({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256"}, "needs sasl.username"),
    ({"bootstrap.servers": "h:1", "security.protocol": "TLS"}, "unknown security.protocol"),
    ({"bootstrap.servers": "h:1", "request.timeout.ms": "soon"}, "request.timeout.ms"),
])
def test_unusable_settings_are_named(props, message):
    """Each unusable setting fails with a message naming it."""
    with pytest.raises(ClientConfigError, match=message):
        ClientConfig.from_properties(props)


def test_hostname_check_can_be_disabled():
    """ssl.endpoint.identification.algorithm empty (Kafka) or none (librdkafka) turns the host-name check off."""
    for value in ("", "none"):
        config = ClientConfig.from_properties({"security.protocol": "SSL",
                                               "ssl.endpoint.identification.algorithm": value}, bootstrap_servers="h:1")
        assert not config.ssl_check_hostname


def test_missing_file_is_a_clear_error(tmp_path):
    """A --command-config that does not exist names the file."""
    with pytest.raises(ClientConfigError, match="cannot read client settings"):
        load_properties(tmp_path / "nope.properties")


def test_a_bad_unicode_escape_names_the_file_and_line_never_the_escape(tmp_path):
    """password=my\\uZZ9secret on line 5 (after a continuation): the error gives the file and line 5 only; no
    character of the value (javaproperties' own message quotes "\\uZZ9s"), and nothing chained."""
    path = tmp_path / "client.properties"
    path.write_text("# settings\nsasl.username=bob\nsasl.mechanism=SCRAM-\\\n  SHA-256\npassword=my\\uZZ9secret\n")
    with pytest.raises(ClientConfigError) as info:
        load_properties(path)
    assert str(info.value) == (f"client settings {str(path)!r}, line 5: invalid \\u escape "
                               "(\\u must be followed by 4 hexadecimal digits)")
    assert info.value.__context__ is None and info.value.__cause__ is None
