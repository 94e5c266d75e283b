"""Property-based tests at the identities file: whoever edits the operators file by hand (or a
tool that writes it) decides its bytes. The promise: any content is loaded, each operator with a
hash a sign-in can check in bounded time, or refused with an IdentityError that says which line
and what is expected; a sign-in against it is yes or no, never an exception.
`--hypothesis-profile=explore` searches further."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jetwatch.dashboard import identities
from jetwatch.dashboard.identities import IdentityError

GOOD = "ana:" + identities.hash_password("correct horse battery", n=2, r=1, p=1)
pieces = st.one_of(
    st.just(GOOD), st.just("# a comment"), st.just(""), st.just("   "),
    st.builds(lambda n, r, p, salt, digest: f"bo:scrypt:{n}:{r}:{p}:{salt}:{digest}",
              st.sampled_from(["16384", "2", "3", "0", "1048576", "2097152", "99999999999", "-1", "x", "٣", ""]),
              st.sampled_from(["8", "1", "0", "33", "9" * 12, ""]), st.sampled_from(["1", "0", "17", "1073741823", ""]),
              st.sampled_from(["00ff", "", "zz", "0", "ÿ"]), st.sampled_from(["ab" * 32, "", "a", "ab" * 8, "ab" * 65])),
    st.text(max_size=30))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.lists(pieces, max_size=5).map(lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass")),
                 st.binary(max_size=40)))
# Each failed before: a file that is not UTF-8 raised UnicodeDecodeError out of read() and of the
# sign-in; a p past a C int was loaded and raised TypeError from hashlib in the sign-in; a p of a
# billion was loaded, so that operator could never sign in (hashlib refuses its memory) and
# nothing said why.
@example(b"\xff\xfeana:scrypt:2:1:1:00:" + b"ab" * 32)
@example(b"bo:scrypt:16384:8:99999999999999999999:00ff:" + b"ab" * 32)
@example(b"bo:scrypt:16384:8:1073741823:00ff:" + b"ab" * 32)
def test_any_identities_file_is_loaded_with_usable_hashes_or_refused_in_words(tmp_path, content):
    path = tmp_path / "operators"
    path.write_bytes(content)
    try:
        loaded = identities.read(path)
    except IdentityError as exc:
        assert str(path) in str(exc)
    else:
        for name, stored in loaded.items():
            assert identities.NAME.match(name)
            kind, n, r, p, salt, digest = stored.split(":")
            assert kind == "scrypt" and int(n) <= 1 << 20 and int(r) <= 32 and int(p) <= 16
    for name in ("ana", "bo", "nobody"):
        assert identities.verify(path, name, "correct horse battery") in (True, False)
