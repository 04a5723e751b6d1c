"""Safety signals for ``Hit.trust`` (RCP §7.7, §15.2): a screen for text that
tries to instruct the model that will read it.

:func:`assess` runs a fixed table of detectors over a passage, each with a
severity weight, and combines the ones that fire into a score::

    score = product over fired detectors of (1 - weight)

    STRONG  0.60   alone -> 0.40   e.g. "ignore previous instructions", <|im_start|>
    MEDIUM  0.35   alone -> 0.65   two together -> 0.42
    WEAK    0.15   alone -> 0.85   e.g. zero-width characters, an HTML comment

A clean passage scores 1.0. ``injection_suspected`` is ``score < 0.5``: one
strong detector, or two medium ones, is enough; weak ones only tip the
balance. Each detector counts once however often it matches.

The detectors read a normalised copy of the text (invisible characters
removed, NFKC-folded, Unicode tag characters and base64 blobs decoded) so
``ig<ZWSP>nore previous instructions`` does not slip through. The patterns
are English-only and tuned to leave encyclopedic prose alone: "the band
ignored previous trends" or a film called *Ignore* do not fire.

These are advisory hints (§15.2): the absence of a flag proves nothing.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

LEVELS = ("trusted", "community", "untrusted")
STRONG, MEDIUM, WEAK = 0.6, 0.35, 0.15
SUSPECT_BELOW = 0.5

_I, _M, _S = re.IGNORECASE, re.MULTILINE, re.DOTALL


@dataclass(frozen=True, slots=True)
class Trust:
    """Provenance level plus the injection screen's verdict for one passage."""

    level: str
    score: float
    injection_suspected: bool
    sanitized: bool
    reasons: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        """The RCP ``Hit.trust`` object (``reasons`` stay internal)."""
        return {
            "level": self.level,
            "score": self.score,
            "injectionSuspected": self.injection_suspected,
            "sanitized": self.sanitized,
        }


# ── hidden content ───────────────────────────────────────────────────────────
# Invisible characters. Those in _ZW_SCRIPT have honest uses in Arabic, Hebrew,
# Persian and Indic text (and emoji), so they are only stripped next to a Latin
# letter or digit, where they can only serve to split words.
_ZW_ALWAYS = "\u00ad\u180e\u200b\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_ZW_SCRIPT = "\u061c\u200c-\u200f"
_ZW_ALL = _ZW_ALWAYS + _ZW_SCRIPT
_INVISIBLE = re.compile(f"[{_ZW_ALL}]")
_STRIP_INVISIBLE = re.compile(
    f"[{_ZW_ALWAYS}]|(?<=[A-Za-z0-9])[{_ZW_SCRIPT}]+|[{_ZW_SCRIPT}]+(?=[A-Za-z0-9])"
)
# a word split by anything but a soft hyphen, a run of four, or a bidi override
_SUSPICIOUS_INVISIBLE = re.compile(
    f"[A-Za-z][{_ZW_ALL.replace(chr(0xAD), '')}]+[A-Za-z]|[{_ZW_ALL}]{{4,}}|[\u202d\u202e]"
)
_TAG_CHARS = re.compile("[\U000e0000-\U000e007f]")
_HTML_COMMENT = re.compile(r"<!--(.*?)(?:-->|\Z)", _S)
_SCRIPT_STYLE = re.compile(r"<(script|style)\b[^>]*>(.*?)(?:</\1\s*>|\Z)", _I | _S)
_HIDDEN_CSS = (
    r"display\s*:\s*none|visibility\s*:\s*hidden|opacity\s*:\s*0(?:\.0+)?\s*(?:;|[\"'])"
    r"|font-size\s*:\s*0(?:\.0+)?(?:px|pt|em|rem|%)?\s*(?:;|[\"'])"
    r"|(?<![\w-])color\s*:\s*(?:white|#fff(?:fff)?\b|rgba?\(\s*255\s*,\s*255\s*,\s*255)"
)
# Tag and attribute lengths are bounded so unclosed markup stays linear to scan.
_HIDDEN_OPEN = re.compile(
    r"<(?P<tag>[a-z][\w-]{0,30})\b(?=[^<>]{0,500}?(?:style\s*=\s*[\"'][^\"'<>]{0,500}?(?:"
    + _HIDDEN_CSS
    + r")|\shidden[\s>=/]))[^<>]{0,1000}>",
    _I,
)
_CLOSE_TAG = re.compile(r"</([a-z][\w-]{0,30})\s*>", _I)
_ROLE_TOKENS = re.compile(r"<\|[a-z_]{2,30}\|>|\[/?INST\]|<</?SYS>>", _I)
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{32,}={0,2}")
_DECODE_CUE = re.compile(r"\b(?:decode[sd]?|decoding|base-?64|b64|atob)\b", _I)
_INSTRUCTION_CUE = re.compile(
    r"\b(?:ignore|instructions?|prompt|assistant|chatbot|AI|LLM|model|system|respond|reply"
    r"|you\s+(?:are|must|should|will|need)|do\s+not|don't|always|never)\b",
    _I,
)


# ── detectors over the normalised text ───────────────────────────────────────
_VERB = r"(?:ignore|disregard|forget|do\s+not\s+follow|don'?t\s+follow|stop\s+following)"
_QUAL = r"(?:previous|prior|above|earlier|preceding|foregoing|original|initial|former)"
_NOUN = (
    r"(?:instructions?|prompts?|context|directions?|directives?|rules|guidelines|messages?"
    r"|commands?|guidance|constraints|programming)"
)
_AI = r"(?:AI|assistant|chatbot|bot|LLM|language\s+model|GPT|ChatGPT|agent)"

# Each detector's anchors: groups of lowercase literals, one of each group found in any
# text the pattern matches (``\s+`` between words: an anchor holds no space). A passage
# whose folded copy (``_FOLD``, then lower case) lacks a group is not searched: most
# prose lacks one of every detector's groups, and a literal test is far cheaper than
# the search (docs/benchmarks.md has the cost per passage with and without them).
_Anchors = tuple[tuple[str, ...], ...]
_V = ("ignore", "disregard", "forget", "follow")
_Q = (
    *("previous", "prior", "above", "earlier", "preceding"),
    *("foregoing", "original", "initial", "former"),
)
_N = (
    *("instruction", "prompt", "context", "direction", "directive", "rules"),
    *("guideline", "message", "command", "guidance", "constraints", "programming"),
)
_A = ("ai", "assistant", "chatbot", "bot", "llm", "language", "gpt", "agent")
_TELL = (
    *("reveal", "print", "repeat", "output", "show", "display", "leak"),
    *("disclose", "tell", "give", "share", "dump", "recite", "send"),
)
_SEND = ("send", "post", "upload", "forward", "transmit", "exfiltrate")
# the letters outside ASCII that IGNORECASE matches to an ASCII one (every code point
# checked in the tests); any other character a literal of a pattern matches is that
# literal's letter in either case
_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})

_DETECTORS: tuple[tuple[str, float, re.Pattern[str], _Anchors], ...] = tuple(
    (name, weight, re.compile(pattern, re.IGNORECASE), anchors)
    for name, weight, pattern, anchors in (
        (
            "override",
            STRONG,
            rf"\b{_VERB}\s+(?:(?:all|any|every|the|your|my|these|those|of)\s+){{0,3}}{_QUAL}"
            rf"\s+(?:\w+\s+)?{_NOUN}\b",
            (_V, _Q, _N),
        ),
        (
            "override",
            STRONG,
            rf"\b(?:{_VERB}|override|bypass)\s+(?:(?:all|any|the|your|my|of)\s+){{0,3}}"
            r"(?:system|developer)\s+(?:prompt|instructions|message)\b",
            ((*_V, "override", "bypass"), ("system", "developer")),
        ),
        (
            "override_loose",
            MEDIUM,
            r"\b(?:override|bypass)\s+(?:(?:all|any|the|your|my|of)\s+){0,3}"
            rf"(?:{_QUAL}\s+)?(?:instructions|prompts?|safety\s+guidelines"
            r"|content\s+polic(?:y|ies))\b",
            (("override", "bypass"),),
        ),
        (
            "override",
            STRONG,
            rf"\b{_VERB}\s+(?:(?:everything|anything|all)\s+(?:above|before|previously"
            r"|you\s+(?:were|have\s+been)\s+told)|the\s+above\b(?!-))",
            (_V, ("above", "before", "previously", "told")),
        ),
        (
            "override_loose",
            MEDIUM,
            rf"\b{_VERB}\s+(?:all|any|your)\s+(?:of\s+)?(?:your\s+|the\s+)?{_NOUN}\b",
            (_V, _N),
        ),
        (
            "role_reassignment",
            STRONG,
            r"\byou\s+are\s+now\s+(?:(?:an?|in|the|my)\s+)?(?:(?:new|different|unrestricted"
            r"|unfiltered|uncensored|jailbroken|evil|developer|god|admin|debug|jailbreak)\s+)*"
            rf"(?:{_AI}|DAN|mode)\b",
            (("you",), ("now",)),
        ),
        ("role_reassignment_soft", MEDIUM, r"\byou\s+are\s+now\b", (("you",), ("now",))),
        (
            "role_reassignment_soft",
            MEDIUM,
            r"\bfrom\s+now\s+on,?\s+you\s+(?:are|will|must|shall|should)\b",
            (("now",), ("you",)),
        ),
        (
            "role_reassignment_soft",
            MEDIUM,
            r"\bpretend\s+(?:that\s+)?you\s+are\b|\brole-?play\s+as\b",
            (("pretend", "roleplay", "role-play"),),
        ),
        (
            "act_as",
            MEDIUM,
            r"(?m)(?:^|[.!?:;]\s+|\b(?:please|now|you\s+(?:will|must|should|shall))\s+)"
            r"act\s+as\s+(?:if\s+you|an?\s|my\s|the\s|though\s+you)",
            (("act",), ("as",)),
        ),
        (
            "new_instructions",
            STRONG,
            r"\b(?:new|updated|revised|real|actual|important|additional|secret|hidden|system|admin"
            r"|developer|override)\s+(?:instructions?|directives?|prompt|task|orders)\s*:",
            (("instruction", "directive", "prompt", "task", "orders"), (":",)),
        ),
        (
            "addresses_model",
            MEDIUM,
            rf"\b(?:note|message|instructions?)\s+(?:to|for)\s+(?:the\s+|any\s+)?{_AI}\b",
            (("note", "message", "instruction"), _A),
        ),
        (
            "addresses_model",
            MEDIUM,
            rf"(?-i:\b{_AI}\s*[,:]\s*(?:you\s+)?(?:must|should|will|need\s+to|shall)\b)",
            (_A, ("must", "should", "will", "need", "shall"), (",", ":")),
        ),
        (
            "addresses_model",
            STRONG,
            rf"\bif\s+you\s+are\s+an?\s+(?:\w+\s+)?{_AI}\b",
            (("if",), ("you",), _A),
        ),
        ("system_prompt", MEDIUM, r"\bsystem\s+prompt\b", (("system",), ("prompt",))),
        (
            "role_tag",
            STRONG,
            r"<\|[a-z_]{2,30}\|>|\[/?INST\]|<</?SYS>>",
            (("<|", "[inst]", "[/inst]", "<<sys>>", "<</sys>>"),),
        ),
        (
            "role_tag",
            STRONG,
            r"(?m)^[ \t]*#{2,4}[ \t]*(?:system|assistant|user|human)[ \t]*:",
            (("##",), (":",)),
        ),
        (
            "role_tag",
            STRONG,
            r"(?m)^[ \t]*system[ \t]*:[ \t]*(?:you|ignore|from\s+now|your|as\s+an?)\b",
            (("system",), (":",)),
        ),
        (
            "role_tag",
            MEDIUM,
            r"</?(?:system|system_prompt|instructions?)>",
            (("<system", "</system", "<instruction", "</instruction"),),
        ),
        (
            "exfiltration",
            STRONG,
            r"\b(?:reveal|print|repeat|output|show|display|leak|disclose|tell\s+me|give\s+me"
            r"|share|dump|recite|send)\s+(?:me\s+|us\s+)?(?:your|the)\s+"
            r"(?:(?:full|entire|exact|original|initial|hidden|secret|internal|complete|whole)\s+)*"
            r"(?:system\s+(?:prompt|message)|initial\s+prompt|hidden\s+prompt|developer\s+message"
            r"|api\s+keys?)\b",
            (("prompt", "message", "api"), _TELL),
        ),
        (
            "exfiltration",
            STRONG,
            r"\b(?:reveal|print|repeat|output|leak|disclose|tell\s+me|give\s+me|dump|recite)\s+"
            r"(?:me\s+)?(?:all\s+(?:of\s+)?)?your\s+(?:\w+\s+)?"
            r"(?:instructions|prompt|credentials)\b",
            (("your",), ("instructions", "prompt", "credentials")),
        ),
        (
            "exfiltration",
            STRONG,
            r"\b(?:send|post|upload|forward|transmit|exfiltrate|leak|email)\s+(?:\S+\s+){0,4}?"
            r"(?:conversation|chat\s+history|context|system\s+prompt|prompt|api\s+keys?|credentials"
            r"|passwords?|secrets?|user\s+data|personal\s+data|previous\s+messages)\b"
            r"[^\n]{0,80}?(?:https?://|www\.)",
            ((*_SEND, "leak", "email"), ("http", "www.")),
        ),
        (
            "exfiltration",
            STRONG,
            r"!\[[^\]\n]{0,100}\]\(\s*https?://[^)\s]*(?:\{|%7B|\$\{|<)",
            (("![",), ("http",)),
        ),
        (
            "send_to_url",
            WEAK,
            r"\b(?:send|post|upload|forward|transmit|exfiltrate)\b[^\n.]{0,80}?"
            r"\bto\s+(?:https?://|www\.)",
            (_SEND, ("http", "www.")),
        ),
        (
            "concealment",
            MEDIUM,
            r"\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|mention\s+(?:this|it)\s+to"
            r"|reveal\s+(?:this\s+)?to|let|alert|warn)\s+the\s+user\b"
            r"|\bwithout\s+(?:telling|informing|notifying|alerting)\s+the\s+user\b",
            (("user",),),
        ),
        (
            "tool_injection",
            MEDIUM,
            r"\b(?:call|invoke|execute|trigger)\s+the\s+(?:[\w.-]+\s+){0,2}?(?:tool|plugin)\b",
            (("tool", "plugin"), ("call", "invoke", "execute", "trigger")),
        ),
        (
            "tool_injection",
            STRONG,
            r"[\"'](?:function_call|tool_calls?|tool_use|tool_name)[\"']\s*:",
            (("function_call", "tool_call", "tool_use", "tool_name"),),
        ),
        (
            "tool_injection",
            STRONG,
            r"<(?:function_calls|tool_call|invoke)\b",
            (("<function_calls", "<tool_call", "<invoke"),),
        ),
    )
)
# chat-transcript speaker labels at line start; two different ones make a dialogue
_TURN_MARKER = re.compile(r"^[ \t]*(Human|Assistant|User|AI|Bot|GPT|System|SYSTEM)[ \t]*:", _M)

_WEIGHTS = {
    "invisible_chars": WEAK,
    "unicode_tags": STRONG,
    "html_comment": WEAK,
    "markup_script": WEAK,
    "hidden_html": MEDIUM,
    "hidden_instructions": STRONG,
    "encoded_payload": MEDIUM,
    "turn_marker": MEDIUM,
    "turn_markers": STRONG,
}


def assess(text: str, *, source_level: str = "community") -> Trust:
    """Screen ``text`` and return its :class:`Trust`.

    ``source_level`` is the provenance of the source (``"community"`` unless
    the operator vouches for it); it becomes ``"untrusted"`` when injection is
    suspected. ``sanitized`` says whether :func:`sanitize` would change the text.
    """
    if source_level not in LEVELS:
        raise ValueError(f"source_level must be one of {LEVELS}, got {source_level!r}")
    fired = _hidden_signals(text)
    scan = _normalise(text)
    for name, weight in _detected(scan):
        fired[name] = max(weight, fired.get(name, 0.0))
    speakers = {m.lower() for m in _TURN_MARKER.findall(scan)}
    if speakers:
        name = "turn_markers" if len(speakers) > 1 else "turn_marker"
        fired[name] = _WEIGHTS[name]
    score = 1.0
    for weight in fired.values():
        score *= 1.0 - weight
    score = round(score, 4)
    suspected = score < SUSPECT_BELOW
    return Trust(
        level="untrusted" if suspected else source_level,
        score=score,
        injection_suspected=suspected,
        sanitized=sanitize(text)[1],
        reasons=tuple(sorted(fired)),
    )


def _detected(scan: str) -> list[tuple[str, float]]:
    """(name, weight) of each detector of the table whose pattern finds ``scan``: only
    those whose anchors the folded copy holds are searched."""
    low = scan.translate(_FOLD).lower()
    return [
        (name, weight)
        for name, weight, pattern, anchors in _DETECTORS
        if all(any(a in low for a in group) for group in anchors) and pattern.search(scan)
    ]


def sanitize(text: str) -> tuple[str, bool]:
    """``text`` without hidden content, and whether anything was removed.

    Drops ``<script>``/``<style>`` elements, elements hidden by CSS or the
    ``hidden`` attribute, HTML comments, chat-template role tokens
    (``<|im_start|>``, ``[INST]``, ``<<SYS>>``), and invisible characters
    (zero-width, bidi controls, soft hyphens, Unicode tag characters; joiners
    and direction marks only beside Latin letters or digits, since Arabic,
    Hebrew and Indic scripts use them legitimately).
    Visible text is left as it is, so offsets into it shift only where
    something was removed.
    """
    if text.isascii() and "<" not in text and "[" not in text:
        return text, False  # every pattern below needs one of these
    clean = _SCRIPT_STYLE.sub("", text)
    for start, end, _ in reversed(_hidden_elements(clean)):
        clean = clean[:start] + clean[end:]
    clean = _HTML_COMMENT.sub("", clean)
    clean = _ROLE_TOKENS.sub("", clean)
    clean = _STRIP_INVISIBLE.sub("", clean)
    clean = _TAG_CHARS.sub("", clean)
    return clean, clean != text


def _normalise(text: str) -> str:
    """What the detectors read: visible text folded, hidden payloads appended."""
    if text.isascii():  # nothing invisible, no tag characters, NFKC leaves it alone
        return "\n".join([text, *(e for e in _decoded_blobs(text) if e)])
    extra = [_decode_tags(text), *_decoded_blobs(text)]
    visible = unicodedata.normalize("NFKC", _TAG_CHARS.sub("", _INVISIBLE.sub("", text)))
    return "\n".join([visible, *(e for e in extra if e)])


def _hidden_signals(text: str) -> dict[str, float]:
    """Detectors for content a human reader would not see."""
    names: list[str] = []
    if not text.isascii() and _SUSPICIOUS_INVISIBLE.search(text):
        names.append("invisible_chars")
    hidden = [_decode_tags(text)]
    if hidden[0]:
        names.append("unicode_tags")
    if "<" in text:
        comments = [m.group(1) for m in _HTML_COMMENT.finditer(text)]
        elements = [body for _, _, body in _hidden_elements(text)]
        if comments:
            names.append("html_comment")
        if elements:
            names.append("hidden_html")
        if _SCRIPT_STYLE.search(text):
            names.append("markup_script")
        hidden += comments + elements
    if any(_INSTRUCTION_CUE.search(h) for h in hidden if h):
        names.append("hidden_instructions")
    if _encoded_payload(text):
        names.append("encoded_payload")
    return {name: _WEIGHTS[name] for name in names}


def _hidden_elements(text: str) -> list[tuple[int, int, str]]:
    """(start, end, inner text) of each element hidden by CSS or ``hidden``.

    An element ends at the first closing tag of its name, so a hidden element
    nesting another of the same name is cut short; the rest stays visible.
    """
    if "<" not in text:
        return []
    closes: dict[str, list[tuple[int, int]]] = {}
    for m in _CLOSE_TAG.finditer(text):
        closes.setdefault(m.group(1).lower(), []).append((m.start(), m.end()))
    spans: list[tuple[int, int, str]] = []
    for m in _HIDDEN_OPEN.finditer(text):
        ends = closes.get(m.group("tag").lower(), [])
        i = bisect.bisect_left(ends, (m.end(), 0))
        if (spans and m.start() < spans[-1][1]) or i == len(ends):
            continue
        spans.append((m.start(), ends[i][1], text[m.end() : ends[i][0]]))
    return spans


def _decode_tags(text: str) -> str:
    """ASCII smuggled as Unicode tag characters (U+E0020..U+E007E)."""
    if not _TAG_CHARS.search(text):
        return ""
    return "".join(chr(ord(c) - 0xE0000) for c in _TAG_CHARS.findall(text) if ord(c) > 0xE001F)


def _decoded_blobs(text: str) -> list[str]:
    """Printable text hidden in base64 blobs, so the detectors can read it."""
    out = []
    for match in _BASE64.finditer(text):
        blob = match.group(0)
        try:
            raw = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True)
            decoded = raw.decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            continue
        if all(c.isprintable() or c.isspace() for c in decoded):
            out.append(decoded)
    return out


def _encoded_payload(text: str) -> bool:
    """A base64-looking blob within 200 characters of a cue to decode it."""
    for match in _BASE64.finditer(text):
        window = text[max(0, match.start() - 200) : match.end() + 200]
        if _DECODE_CUE.search(window):
            return True
    return False
