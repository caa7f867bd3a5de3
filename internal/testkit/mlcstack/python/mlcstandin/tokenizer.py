"""Stand-ins for MLC's C++ tokenizer tools (cpp/tokenizers/tokenizers.cc,
streamer.cc) over caddy-mlc's built-in "tiny" model.

The tiny tokenizer (engine/tokenizer/tiny in caddy-mlc) is word-level: the
special tokens, one token per byte, single-character symbols and English
words with a leading space. The Go side of the test writes its vocabulary
to standin-tokenizer.json in the model directory; encoding follows the Go
tokenizer's piece rules (tiny/tokenizer.go, pieceLen).
"""

import json
import os

TOKENIZER_FILE = "standin-tokenizer.json"

_REPLACEMENT = "\ufffd"


def _is_letter(c):
    return 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A


def _piece_len(s, i):
    """The length of the piece s[i:] starts with: a space and the letters
    after it, a run of letters, or one byte."""
    start = i + 1 if s[i] == 0x20 else i
    n = start
    while n < len(s) and _is_letter(s[n]):
        n += 1
    return 1 if n == start else n - i


class Tokenizer:
    """mlc.Tokenizer for the tiny model."""

    def __init__(self, model_dir):
        with open(os.path.join(model_dir, TOKENIZER_FILE), encoding="utf-8") as f:
            vocab = json.load(f)
        self.tokens = [bytes(t) for t in vocab["tokens"]]
        self.special = {int(k): v for k, v in vocab["special"].items()}
        self.eos_token_ids = list(vocab["eos_token_ids"])
        self.first_byte = vocab["first_byte"]
        self.pieces = {self.tokens[i]: i for i in range(vocab["first_piece"], len(self.tokens))}
        # PostProcessedTokenTable: what the stop-string handler and the
        # logprobs see of each token. Special tokens show their names, as
        # a real tokenizer's table does.
        self.table = [self.special[i].encode() if i in self.special else t for i, t in enumerate(self.tokens)]

    def encode(self, text):
        s = text.encode("utf-8")
        ids = []
        i = 0
        while i < len(s):
            n = _piece_len(s, i)
            piece = s[i : i + n]
            if piece in self.pieces:
                ids.append(self.pieces[piece])
            else:
                ids.extend(self.first_byte + b for b in piece)
            i += n
        return ids

    def decode_bytes(self, ids):
        return b"".join(b"" if i in self.special else self.tokens[i] for i in ids if 0 <= i < len(self.tokens))

    def decode(self, ids):
        """Decodes ids, skipping special tokens; invalid UTF-8 becomes
        U+FFFD, as the C++ tokenizers decode."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


class TextStreamer:
    """mlc.TextStreamer (streamer.cc TextStreamerObj): turns delta tokens
    into text, holding back tokens whose text is not valid UTF-8 yet. Python
    strings hold U+FFFD as one character where C++ holds three bytes."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.prefix_tokens = []
        self.pending_tokens = []
        self.finished = False

    def put(self, delta_tokens):
        assert not self.finished, "`put` is not expected to be invoked after finish."
        ret = ""
        dec = self.tokenizer.decode
        for token in delta_tokens:
            self.pending_tokens.append(token)
            all_tokens = self.prefix_tokens + self.pending_tokens
            prefix_str = dec(self.prefix_tokens) if self.prefix_tokens else ""
            full_str = dec(all_tokens)
            new_pending = []
            if full_str.startswith(prefix_str):
                validated = full_str[len(prefix_str) :]
                while self.pending_tokens and len(new_pending) < 3 and validated.endswith(_REPLACEMENT):
                    new_pending.append(self.pending_tokens.pop())
                    all_tokens.pop()
                    validated = dec(all_tokens)[len(prefix_str) :]
            else:
                if len(self.pending_tokens) < 3:
                    continue
                found = False
                while self.pending_tokens and len(new_pending) < 3:
                    new_pending.append(self.pending_tokens.pop())
                    all_tokens.pop()
                    full_str = dec(all_tokens)
                    if full_str.startswith(prefix_str):
                        found = True
                        break
                validated = full_str[len(prefix_str) :] if found else dec(self.pending_tokens)
            if self.pending_tokens:
                self.prefix_tokens = self.pending_tokens
            new_pending.reverse()
            self.pending_tokens = new_pending
            ret += validated
        return ret

    def finish(self):
        all_tokens = self.prefix_tokens + self.pending_tokens
        dec = self.tokenizer.decode
        prefix_str = dec(self.prefix_tokens) if self.prefix_tokens else ""
        full_str = dec(all_tokens) if all_tokens else ""
        self.finished = True
        if full_str.startswith(prefix_str):
            return full_str[len(prefix_str) :]
        return dec(self.pending_tokens)


class StopStrHandler:
    """mlc.StopStrHandler (streamer.cc StopStrHandlerObj): takes generated
    tokens one at a time and returns those that are surely not part of a
    stop string. Matching is on the bytes of the token table (KMP per stop
    string); when a stop string completes, the token in which it starts
    and everything after are dropped."""

    def __init__(self, stop_strs, token_table):
        self.stop_strs = [s.encode("utf-8") for s in stop_strs]
        self.token_table = token_table
        self.cur_match_lengths = [0] * len(self.stop_strs)
        self.partial_match_tables = []
        for s in self.stop_strs:
            assert s, "Stop string cannot be empty."
            table = [-1]
            for i in range(1, len(s)):
                ptr = table[i - 1]
                while ptr != -1 and s[ptr] != s[i - 1]:
                    ptr = table[ptr]
                table.append(ptr + 1)
            self.partial_match_tables.append(table)
        self.pending_token_ids = []
        self.pending_token_lengths = []
        self.pending_string_len = 0
        self.stop_triggered = False

    def put(self, token_id):
        """Returns the token ids that can be handed out after token_id."""
        out = []
        if not self.stop_strs:
            out.append(token_id)
            return out
        assert not self.stop_triggered, "Cannot put new token when already stopped."
        token = self.token_table[token_id]
        self.pending_token_ids.append(token_id)
        self.pending_token_lengths.append(len(token))
        big = 1 << 62
        for ch in token:
            stop_starting_pos = big
            cutoff_length = big
            max_match_length = 0
            for sid, stop in enumerate(self.stop_strs):
                table = self.partial_match_tables[sid]
                cur = self.cur_match_lengths[sid]
                while cur != -1 and ch != stop[cur]:
                    cur = table[cur]
                cur += 1
                self.cur_match_lengths[sid] = cur
                if cur == len(stop):
                    self.stop_triggered = True
                    stop_starting_pos = min(stop_starting_pos, self.pending_string_len + 1 - len(stop))
                    continue
                cutoff_length = min(cutoff_length, self.pending_string_len + 1 - cur)
                max_match_length = max(max_match_length, cur)
            if self.stop_triggered:
                cutoff_length = stop_starting_pos
            cum_length = 0
            while self.pending_token_ids and cum_length + self.pending_token_lengths[0] <= cutoff_length:
                cum_length += self.pending_token_lengths.pop(0)
                out.append(self.pending_token_ids.pop(0))
            if self.stop_triggered:
                return out
            self.pending_string_len = (cutoff_length - cum_length) + max_match_length
        return out

    def finish(self):
        """Returns the tokens still held (the generation ended otherwise)."""
        out = self.pending_token_ids
        self.pending_token_ids, self.pending_token_lengths = [], []
        return out
