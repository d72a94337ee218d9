"""crawlq.web.codings: layered content codings undone in reverse order, in bounded pieces."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import Callable

import brotli  # type: ignore[import-untyped]
import pytest

from crawlq.web.codings import (
    ACCEPT_ENCODING,
    MAX_CODINGS,
    PIECE_BYTES,
    SUPPORTED_CODINGS,
    BodyDecoder,
    CorruptCoding,
    UnsupportedCoding,
    is_identity_label,
    parse_codings,
    split_codings,
)

PAGE = b"<!DOCTYPE html><title>layers</title>" + b"word " * 40_000 + bytes(range(256)) * 100


def raw_deflate(data: bytes) -> bytes:
    obj = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return obj.compress(data) + obj.flush()


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "identity": lambda data: data,
}


def encode(codings: list[str], data: bytes) -> bytes:
    for coding in codings:  # in the order they are listed: the order applied
        data = ENCODERS[coding](data)
    return data


def decode(codings: list[str], body: bytes, chunk_bytes: int) -> bytes:
    decoder = BodyDecoder(codings)
    out: list[bytes] = []
    for start in range(0, len(body), chunk_bytes):
        out += decoder.feed(body[start : start + chunk_bytes])
    out += decoder.finish()
    return b"".join(out)


@pytest.mark.parametrize(
    "codings",
    [
        [],
        ["identity"],
        ["gzip"],
        ["x-gzip"],
        ["deflate"],
        ["br"],
        ["gzip", "gzip"],
        ["deflate", "gzip"],
        ["gzip", "br"],
        ["br", "gzip", "deflate"],
        ["gzip", "identity", "gzip"],
    ],
)
@pytest.mark.parametrize("chunk_bytes", [1, 13, 4096, 10**8])
def test_layers_are_undone_in_reverse_order(codings: list[str], chunk_bytes: int) -> None:
    body = encode(codings, PAGE)
    if chunk_bytes == 1 and len(body) > 20_000:
        body = encode(codings, PAGE[:3000])  # byte by byte: keep it quick
        assert decode(codings, body, chunk_bytes) == PAGE[:3000]
    else:
        assert decode(codings, body, chunk_bytes) == PAGE


def test_the_order_matters() -> None:
    body = encode(["deflate", "gzip"], PAGE)
    with pytest.raises(CorruptCoding) as info:
        decode(["gzip", "deflate"], body, 4096)  # would mean: gunzip last
    assert info.value.coding == "deflate"


@pytest.mark.parametrize("chunk_bytes", [1, 2, 5000])
def test_raw_deflate_is_accepted_as_deflate(chunk_bytes: int) -> None:
    assert decode(["deflate"], raw_deflate(PAGE[:4000]), chunk_bytes) == PAGE[:4000]


@pytest.mark.parametrize("chunk_bytes", [1, 3, 1000])
def test_gzip_members_are_all_decoded_and_trailing_bytes_ignored(chunk_bytes: int) -> None:
    body = gzip.compress(b"first ") + gzip.compress(b"second") + b"\x00\x00 trailing junk"
    assert decode(["gzip"], body, chunk_bytes) == b"first second"
    assert decode(["deflate"], zlib.compress(b"ok") + b"junk", chunk_bytes) == b"ok"


def test_a_stream_cut_before_its_end_keeps_what_it_holds() -> None:
    body = gzip.compress(PAGE)
    assert PAGE.startswith(decode(["gzip"], body[: len(body) // 2], 4096))
    assert len(decode(["gzip"], body[: len(body) // 2], 4096)) > 1000


def test_an_empty_body_decodes_to_nothing() -> None:
    assert decode(["gzip", "br"], b"", 10) == b""


@pytest.mark.parametrize(
    ("codings", "body", "culprit"),
    [
        (["gzip"], b"x" * 20, "gzip"),
        (["deflate"], b"\x78\x9c" + b"\xff" * 20, "deflate"),
        (["br"], b"\xff" * 20, "br"),
        (["br"], brotli.compress(b"ok") + b"junk", "br"),
        (["deflate", "gzip"], gzip.compress(b"not deflate at all, just text", mtime=0), "deflate"),
    ],
)
def test_corrupt_data_names_its_coding(codings: list[str], body: bytes, culprit: str) -> None:
    with pytest.raises(CorruptCoding) as info:
        decode(codings, body, 7)
    assert info.value.coding == culprit
    assert f"bad {culprit} data" in str(info.value)


@pytest.mark.parametrize("coding", ["compress", "x-compress", "zstd", "gzip2", "pack200-gzip"])
def test_unknown_codings_are_refused_before_any_byte(coding: str) -> None:
    with pytest.raises(UnsupportedCoding) as info:
        BodyDecoder(["gzip", coding])
    assert info.value.coding == coding


def test_more_than_max_codings_are_refused() -> None:
    BodyDecoder(["gzip"] * MAX_CODINGS)
    with pytest.raises(UnsupportedCoding, match=f"at most {MAX_CODINGS}"):
        BodyDecoder(["gzip"] * (MAX_CODINGS + 1))


def test_parse_codings_joins_header_lines_and_drops_identity() -> None:
    assert parse_codings(["Deflate", " GZIP , identity,,"]) == ["deflate", "gzip"]
    assert parse_codings([]) == []


@pytest.mark.parametrize(
    "label",
    ["identity", "none", "7bit", "8bit", "binary", "utf-8", "utf8", "iso-8859-1", "latin1",
     "windows-1252", "us-ascii", "ascii", "shift_jis", "cp1251", "koi8-r", "utf-16"],
)  # fmt: skip
def test_labels_that_mean_no_coding(label: str) -> None:
    assert is_identity_label(label)
    assert decode([label], PAGE, 4096) == PAGE  # the body as received
    assert BodyDecoder(["gzip", label]).codings == ("gzip",)


@pytest.mark.parametrize(
    "label",
    ["gzip", "x-gzip", "deflate", "br", "compress", "x-compress", "zstd", "x-foo", "x-unknown",
     "base64", "zlib", "bz2", "hex", "quopri", "uu", "rot13", "*", "utf-8" * 20],
)  # fmt: skip
def test_codings_and_unknown_labels_are_not_identity(label: str) -> None:
    # base64, zlib, bz2...: Python codecs that transform bytes, not charset names
    assert not is_identity_label(label)


def test_unknown_labels_leave_no_trace_in_the_codec_registry() -> None:
    import encodings

    before = len(encodings._cache)
    for n in range(1000):
        assert not is_identity_label(f"x-label-{n}")
    assert len(encodings._cache) == before


def test_split_codings_sets_labels_that_mean_no_coding_apart() -> None:
    assert split_codings(["None"]) == ([], ["none"])
    assert split_codings([""]) == ([], [])
    assert split_codings(["UTF-8, gzip", "identity", " "]) == (["gzip"], ["utf-8", "identity"])
    assert split_codings(["x-unknown, none"]) == (["x-unknown"], ["none"])
    assert parse_codings(["none, br"]) == ["br"]


def test_labels_that_mean_no_coding_do_not_count_against_max_codings() -> None:
    assert len(BodyDecoder(["none", "utf-8", *["gzip"] * MAX_CODINGS, "8bit"]).codings) == 4


def test_every_coding_asked_for_is_supported() -> None:
    assert set(parse_codings([ACCEPT_ENCODING])) <= SUPPORTED_CODINGS


def zeros_gzip(n_mib: int) -> bytes:
    """A gzip body of ``n_mib`` MiB of zeros, compressed a MiB at a time."""
    obj = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = bytes(1 << 20)
    return b"".join([obj.compress(block) for _ in range(n_mib)]) + obj.flush()


def zeros_br(n_mib: int) -> bytes:
    """A br body of ``n_mib`` MiB of zeros, compressed a MiB at a time."""
    obj = brotli.Compressor(quality=5)
    block = bytes(1 << 20)
    return b"".join([obj.process(block) for _ in range(n_mib)]) + obj.finish()


@pytest.mark.parametrize("layers", [["gzip"], ["gzip", "gzip"], ["br"], ["br", "gzip"]])
def test_a_bomb_is_decoded_in_bounded_pieces(layers: list[str]) -> None:
    inner = zeros_gzip(256) if layers[0] == "gzip" else zeros_br(256)
    body = encode(layers[1:], inner)  # 256 MiB of zeros once every layer is undone
    tracemalloc.start()
    try:
        decoder = BodyDecoder(layers)
        decoded = 0
        for piece in decoder.feed(body):
            assert len(piece) <= 2 * PIECE_BYTES  # brotli's limit is a soft one
            decoded += len(piece)
            if decoded > 64 << 20:
                break  # the caller's cap
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert decoded > 64 << 20
    # the body itself (a few hundred kB at most) plus a piece or two per stage
    assert peak_bytes < len(body) + 4 << 20, f"{peak_bytes} bytes at peak"
