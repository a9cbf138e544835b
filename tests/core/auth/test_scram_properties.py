"""Properties of the SCRAM server against a real client (scramp) over random inputs."""

import pytest
import scramp
from hypothesis import given
from hypothesis import strategies as st
from scramp.utils import saslprep

from secmeta.core.auth.scram import ScramServer, credential_from_password
from secmeta.core.errors import SaslAuthenticationException
from secmeta.events.types import ScramMechanism

MECHANISMS = st.sampled_from([ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512])


def _saslprep_stable(text: str) -> bool:
    """scramp SASLpreps what it sends; the server does not, so keep inputs SASLprep leaves alone."""
    try:
        return saslprep(text) == text
    except scramp.ScramException:
        return False


_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=20,
)
# Bias towards the characters the wire format escapes or splits on.
usernames = st.one_of(_text, st.text(alphabet="ab=,\u00e9", min_size=1, max_size=10)).filter(
    _saslprep_stable
)
passwords = st.one_of(_text, st.text(alphabet="pw=,\u00fc\u4e2d", min_size=1)).filter(
    _saslprep_stable
)


def _authenticate(mechanism, username, stored_password, client_password) -> ScramServer:
    credential = credential_from_password(mechanism, stored_password.encode(), 4096)
    server = ScramServer(mechanism, {username: credential}.get, fake_salt_key=b"k")
    client = scramp.ScramClient([mechanism.mechanism_name], username, client_password)
    client.set_server_first(server.first(client.get_client_first()))
    client.set_server_final(server.final(client.get_client_final()))
    return server


@given(mechanism=MECHANISMS, username=usernames, password=passwords)
def test_scramp_client_always_authenticates(mechanism, username, password):
    """For any user name and password, a scramp client authenticates as User:<name>."""
    server = _authenticate(mechanism, username, password, password)
    assert server.principal == f"User:{username}"


@given(
    mechanism=MECHANISMS,
    username=usernames,
    pair=st.lists(passwords, min_size=2, max_size=2, unique=True),
)
def test_other_password_never_authenticates(mechanism, username, pair):
    """For any user, a password other than the stored one is refused."""
    with pytest.raises(SaslAuthenticationException):
        _authenticate(mechanism, username, pair[0], pair[1])
