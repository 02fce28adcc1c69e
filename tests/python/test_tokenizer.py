"""Tokenizer through the C API and the Python binding: round trips on a
synthetic byte-level vocabulary, special tokens, errors, reference vectors on
models carrying the shared reference vocabularies (skipped without them), and
the CLI commands that take text."""
import os
import pathlib
import subprocess

import pytest

import moestream
from moestream import _ffi
from moestream import Status

ROUND_TRIP = [
    "",
    "the quick brown fox",
    "  leading, trailing  ",
    "tabs\tnew\nlines\r\n\n",
    "numbers 1234567 and 3.14",
    "it's we'll they're \"quoted\" (parens) [x] {y}",
    "ünïcödé 日本語 한국어 текст 🦙🚀",
    "<|endoftext|> in the middle <|endoftext|>",
]


@pytest.fixture(scope="module")
def lib():
    if not os.environ.get("MOESTREAM_LIB"):
        pytest.skip("MOESTREAM_LIB not set (run through ctest)")
    return _ffi.lib()


def _model(dirpath, name, tokenizer, n_vocab=512):
    from tools.make_model import ModelSpec, make_model
    spec = ModelSpec(arch="qwen3moe", n_embd=64, n_layer=1, n_head=2, n_head_kv=1, n_expert=4, n_expert_used=2,
                     n_ff_expert=32, n_vocab=n_vocab, n_ctx=64, quant_mix="q8_0", seed=1, tokenizer=tokenizer)
    path = dirpath / name
    make_model(path, spec)
    return path


@pytest.fixture(scope="module")
def models(lib, tmp_path_factory):
    d = tmp_path_factory.mktemp("tokenizer")
    return {"synthetic": _model(d, "synthetic.gguf", "synthetic"), "none": _model(d, "none.gguf", "none")}


@pytest.fixture(scope="module")
def ctx(models):
    c = moestream.Context(models["synthetic"], n_threads=1, n_ctx=64, profile_path="")
    yield c
    c.close()


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_round_trip(ctx, text):
    for parse_special in (False, True):
        tokens = ctx.tokenize(text, add_special=False, parse_special=parse_special)
        assert all(0 <= t < ctx.n_vocab for t in tokens)
        assert ctx.detokenize(tokens) == text


def test_merges_shorten_known_words(ctx):
    text = "the quick brown fox jumps over the lazy dog"
    assert len(ctx.tokenize(text, add_special=False)) < len(text) // 2


def test_special_tokens_and_ids(ctx):
    eot = ctx.n_vocab - 1
    assert ctx.bos_token == eot and ctx.eos_token == eot
    assert ctx.tokenize("<|endoftext|>", add_special=False, parse_special=True) == [eot]
    assert eot not in ctx.tokenize("<|endoftext|>", add_special=False, parse_special=False)
    # add_bos_token is false in this vocabulary.
    assert ctx.tokenize("x", add_special=True) == ctx.tokenize("x", add_special=False)
    assert ctx.token_to_piece(eot) == b"<|endoftext|>"


def test_errors(lib, ctx):
    with pytest.raises(moestream.Error) as e:
        ctx.tokenize(b"bad \xff utf-8", add_special=False)
    assert e.value.status == Status.INVALID_ARGUMENT and "UTF-8" in str(e.value)
    for bad in (-1, ctx.n_vocab):
        with pytest.raises(moestream.Error) as e:
            ctx.token_to_piece(bad)
        assert e.value.status == Status.INVALID_ARGUMENT


def test_rows_past_the_tokenizer_have_no_text(tmp_path):
    # A vocabulary padded past its tokenizer's list: those ids come out of
    # sampling like any other and read as empty text; past the rows, an error.
    from tools.make_model import ModelSpec, make_model
    path = tmp_path / "padded.gguf"
    make_model(path, ModelSpec(arch="qwen3moe", n_embd=64, n_layer=1, n_head=2, n_head_kv=1, n_expert=4,
                               n_expert_used=2, n_ff_expert=32, n_vocab=512, n_ctx=64, quant_mix="q8_0", seed=1,
                               tokenizer="synthetic", tokenizer_padding=3))
    with moestream.Context(path, n_threads=1, n_ctx=64, profile_path="") as c:
        assert c.n_vocab == 515
        eot = c.eos_token
        assert eot == 511
        for pad in (512, 514):
            assert c.token_to_piece(pad) == b""
        assert c.detokenize([c.tokenize("ab", add_special=False)[0], 513, eot]).endswith("<|endoftext|>")
        with pytest.raises(moestream.Error) as e:
            c.token_to_piece(515)
        assert e.value.status == Status.INVALID_ARGUMENT


def test_tokenize_refuses_what_is_not_text(ctx):
    # bytes(5) would be five NUL bytes, bytes([104, 105]) "hi": neither is text.
    for bad in (5, None, 2.5, [104, 105]):
        with pytest.raises(TypeError):
            ctx.tokenize(bad)
    expected = ctx.tokenize("the fox", add_special=False)
    for text in (b"the fox", bytearray(b"the fox"), memoryview(b"the fox")):
        assert ctx.tokenize(text, add_special=False) == expected


def test_small_capacity_reports_the_count(lib, ctx):
    import ctypes
    text = b"the quick brown fox"
    need = len(ctx.tokenize(text, add_special=False))
    buf = (ctypes.c_int32 * 2)()
    n = ctypes.c_size_t(0)
    status = lib.raw("moestream_tokenize")(ctx._h(), text, len(text), 0, 0, buf, 2, ctypes.byref(n))
    assert status == Status.INVALID_ARGUMENT and n.value == need
    status = lib.raw("moestream_tokenize")(ctx._h(), text, len(text), 0, 0, None, 0, ctypes.byref(n))
    assert status == Status.INVALID_ARGUMENT and n.value == need


def test_model_without_tokenizer_is_unsupported(models):
    with moestream.Context(models["none"], n_threads=1, n_ctx=64, profile_path="") as c:
        with pytest.raises(moestream.Error) as e:
            c.tokenize("hello")
        assert e.value.status == Status.UNSUPPORTED and "no tokenizer" in str(e.value)
        with pytest.raises(moestream.Error) as e:
            c.token_to_piece(1)
        assert e.value.status == Status.UNSUPPORTED
        assert c.bos_token is None and c.eos_token is None


def _reference_vocab_dir():
    """MOESTREAM_VOCAB_DIR, else vocab/ in the shared directory beside the source tree (as the C++ test)."""
    if os.environ.get("MOESTREAM_VOCAB_DIR"):
        return pathlib.Path(os.environ["MOESTREAM_VOCAB_DIR"])
    source = pathlib.Path(os.environ.get("MOESTREAM_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
    return source.parent / "shared" / "vocab"


def _reference_vocabs():
    """Every ggml-vocab-*.gguf there: each one is a test case, so none can be left out."""
    d = _reference_vocab_dir()
    if not d.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no reference vocabularies in {d}"))]
    names = sorted(p.name for p in d.glob("ggml-vocab-*.gguf"))
    if not names:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no ggml-vocab-*.gguf in {d}"))]
    return names


def _vectors(base):
    """The test strings of <base>.inp and the expected ids of <base>.out, checked to pair up."""
    inp, out = pathlib.Path(str(base) + ".inp"), pathlib.Path(str(base) + ".out")
    assert inp.exists() and out.exists(), f"{base.name} has no .inp/.out test vectors beside it"
    texts = inp.read_bytes().decode("utf-8").split("\n__ggml_vocab_test__\n")
    assert texts[-1] == "", f"{inp.name} does not end with a separator"
    texts = texts[:-1]
    lines = out.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines = lines[:-1]
    assert texts, f"{inp.name} holds no test strings"
    assert len(lines) == len(texts), f"{inp.name} has {len(texts)} strings but {out.name} {len(lines)} lines"
    return texts, [[int(x) for x in line.split()] for line in lines]


@pytest.mark.parametrize("vocab", _reference_vocabs())
def test_reference_vocab_through_a_model(lib, tmp_path, vocab):
    base = _reference_vocab_dir() / vocab
    texts, expected = _vectors(base)
    path = _model(tmp_path, "m.gguf", f"copy:{base}")
    compared = 0
    with moestream.Context(path, n_threads=1, n_ctx=64, profile_path="") as c:
        for text, ids in zip(texts, expected):
            assert c.tokenize(text, add_special=False, parse_special=False) == ids, repr(text)
            compared += 1
    assert compared == len(texts) > 0


def test_cli_pieces_keep_nul_bytes(cli_path, ctx, models, tmp_path):
    text = tmp_path / "nul.txt"
    text.write_bytes(b"a\x00b c\x00")
    r = subprocess.run([str(cli_path), "tokenize", "-m", str(models["synthetic"]), "-f", str(text), "--pieces"],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    ids = ctx.tokenize(b"a\x00b c\x00", parse_special=True)
    expected = b"".join(b"%d\t'%s'\n" % (i, ctx.token_to_piece(i)) for i in ids)
    assert expected.count(b"\x00") == 2
    assert r.stdout == expected


def test_cli_tokenize_run_and_perplexity(cli_path, ctx, models, tmp_path):
    model = str(models["synthetic"])
    r = subprocess.run([str(cli_path), "tokenize", "-m", model, "-p", "the fox<|endoftext|>"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [int(x) for x in r.stdout.split()] == ctx.tokenize("the fox<|endoftext|>", parse_special=True)
    r = subprocess.run([str(cli_path), "run", "-m", model, "-p", "the quick", "-n", "4", "--ctx", "64"],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"prompt: 2 tokens" in r.stderr or b"prompt:" in r.stderr
    # The same prompt from a file and from standard input generates the same text.
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("the quick")
    for args, stdin in ((["-f", str(prompt)], None), (["-f", "-"], b"the quick")):
        s = subprocess.run([str(cli_path), "run", "-m", model, *args, "-n", "4", "--ctx", "64"],
                           input=stdin, capture_output=True, timeout=120)
        assert s.returncode == 0, s.stderr
        assert s.stdout == r.stdout and s.stdout
    s = subprocess.run([str(cli_path), "run", "-m", model, "-f", str(tmp_path / "missing.txt")],
                       capture_output=True, text=True, timeout=120)
    assert s.returncode != 0 and "missing.txt" in s.stderr
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog\n" * 3)
    r = subprocess.run([str(cli_path), "perplexity", "-m", model, "-f", str(text), "--ctx", "16"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "perplexity" in r.stdout
    r = subprocess.run([str(cli_path), "tokenize", "-m", str(models["none"]), "-p", "x"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "no tokenizer" in r.stderr
