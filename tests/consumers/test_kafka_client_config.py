"""--command-config for the Kafka jobs: Java properties read by the one parser, JVM settings as librdkafka's.

The file format is java.util.Properties.load's (Kafka's tools read it with Utils.loadProps); the
JAAS entry is Kafka's JaasConfig syntax for PlainLoginModule / ScramLoginModule.
"""

from __future__ import annotations

import pytest

from secmeta.consumers.kafka.client_config import ClientConfigError, read_client_config
from secmeta.core.cli import main
from secmeta.core.wire import client_config as core_client_config
from secmeta.events.keyring import Keyring

SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="pw=;x";'
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" password="hunter2";'


def write(tmp_path, text: str, name: str = "client.properties"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_one_parser_and_one_error_class():
    """The Kafka jobs' ClientConfigError is secmeta.core.wire's: one owner for reading client settings."""
    assert ClientConfigError is core_client_config.ClientConfigError


def test_java_properties_syntax(tmp_path):
    """key: value, key value, continuation lines and escapes read as java.util.Properties does."""
    path = write(tmp_path, "# comment\nsecurity.protocol: SASL_SSL\nlinger.ms 5\n"
                           "client.id=secmeta-\\\n    publisher\nssl.ca.location=/etc/ca\\u002epem\n")
    assert read_client_config(path) == {"security.protocol": "SASL_SSL", "linger.ms": "5",
                                        "client.id": "secmeta-publisher", "ssl.ca.location": "/etc/ca.pem"}


@pytest.mark.parametrize("jaas, mechanism, user, password", [
    (SCRAM_JAAS, "SCRAM-SHA-512", "alice", "pw=;x"),
    (PLAIN_JAAS, "PLAIN", "bob", "hunter2"),
])
def test_sasl_jaas_config_becomes_librdkafka_username_and_password(tmp_path, jaas, mechanism, user, password):
    """sasl.jaas.config of PLAIN or SCRAM gives librdkafka's sasl.username and sasl.password."""
    path = write(tmp_path, f"security.protocol=SASL_SSL\nsasl.mechanism={mechanism}\nsasl.jaas.config={jaas}\n")
    assert read_client_config(path) == {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
                                        "sasl.username": user, "sasl.password": password}


def test_empty_endpoint_identification_and_inline_pem_are_translated(tmp_path):
    """Kafka's empty ssl.endpoint.identification.algorithm is librdkafka's 'none'; inline PEM keys are renamed."""
    path = write(tmp_path, "ssl.endpoint.identification.algorithm=\nssl.truststore.certificates=PEMDATA\n")
    assert read_client_config(path) == {"ssl.endpoint.identification.algorithm": "none", "ssl.ca.pem": "PEMDATA"}


def test_jvm_only_keys_are_named_with_what_to_use_instead(tmp_path):
    """A JKS truststore and a Java class are refused, each named, with the librdkafka setting to use; no value quoted."""
    path = write(tmp_path, "ssl.truststore.location=/etc/kafka/trust.jks\nssl.truststore.password=s3cret\n"
                           "sasl.login.callback.handler.class=com.example.Handler\n")
    with pytest.raises(ClientConfigError) as info:
        read_client_config(path)
    message = str(info.value)
    for key in ("ssl.truststore.location", "ssl.truststore.password", "sasl.login.callback.handler.class"):
        assert f"{key} has no librdkafka equivalent" in message
    assert "ssl.ca.location" in message and "s3cret" not in message and "trust.jks" not in message


@pytest.mark.parametrize("text, problem", [
    ("a=\\u00zz\n", "line 1: invalid \\u escape"),
    ("=value\n", "a setting has no key"),
    ("sasl.jaas.config=com.example.Custom required user=\"x\";\n", "only"),
    (f"sasl.jaas.config={SCRAM_JAAS[:-1]} tokenauth=true;\n", "delegation token"),
])
def test_unusable_files_are_named_errors(tmp_path, text, problem):
    """A bad escape, an empty key, an unknown login module, a token login: ClientConfigError naming the file."""
    path = write(tmp_path, text)
    with pytest.raises(ClientConfigError) as info:
        read_client_config(path)
    assert str(path) in str(info.value) or "sasl.jaas.config" in str(info.value)
    assert problem in str(info.value) and "pw=;x" not in str(info.value)


def test_a_jvm_only_key_on_the_command_line_is_one_error_line(tmp_path, monkeypatch, capsys):
    """`secmeta kafka publish --command-config` with a JKS truststore: exit 2, one line naming the key, no traceback."""
    keys, store = tmp_path / "keys.json", tmp_path / "store"
    Keyring.generate_file(keys)
    monkeypatch.setenv("SECMETA_KEY_FILE", str(keys))
    assert main(["init", "--store", str(store)]) == 0
    capsys.readouterr()
    props = write(tmp_path, "security.protocol=SSL\nssl.truststore.location=/etc/kafka/trust.jks\n")
    code = main(["kafka", "publish", "--once", "--store", str(store), "--bootstrap-server", "127.0.0.1:1",
                 "--command-config", str(props)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("secmeta: error: ") and "ssl.truststore.location has no librdkafka equivalent" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_file_that_is_not_utf8_is_refused_without_its_bytes(tmp_path):
    """A properties file that is not UTF-8: the error names the file and chains nothing holding its bytes."""
    path = tmp_path / "latin1.properties"
    path.write_bytes(b"sasl.password=caf\xe9-secret\n")
    with pytest.raises(ClientConfigError, match="not UTF-8 text") as info:
        read_client_config(path)
    assert info.value.__context__ is None and info.value.__cause__ is None
