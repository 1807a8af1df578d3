"""The cue words behind classification and dedup, and one pass of text analysis to test them.

A `Cue` is a set of words (``because``), word prefixes (``grasp`` → grasping, grasped), token
phrases of two or three words (``do not``; an apostrophe splits like FTS5 does, so "don't" is
``don t``) and CJK substrings (``因为``). All cues compile into one index; `Analysis` tokenises a
text once (`search.segment.tokens`) and finds every cue it contains in one pass of dictionary
lookups — no per-rule regular expression scans, so classifying an insight and extracting its
decisive facts costs one tokenising and one dictionary lookup per token, however many cues there are.
"""

from __future__ import annotations

from dataclasses import dataclass

from robot_mcp_memory.search import segment


@dataclass(frozen=True)
class Cue:
    name: str
    words: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()
    phrases: frozenset[str] = frozenset()
    cjk: tuple[str, ...] = ()


_REGISTRY: list[Cue] = []


def cue(name: str, words: str = "", prefixes: str = "", phrases: tuple[str, ...] = (), cjk: str = "") -> Cue:
    """Declare a cue. Every cue is compiled into one word/prefix/phrase index (`_Index`)."""
    c = Cue(name, frozenset(words.split()), tuple(prefixes.split()), frozenset(phrases), tuple(cjk.split()))
    _REGISTRY.append(c)
    _INDEX.stale = True
    return c


#: How many words `_Index.known` remembers before it starts again (~10 MB at most).
MAX_KNOWN_WORDS = 50_000


class _Index:
    """word → cue names, prefix → cue names, phrase → cue names (built once, on first use)."""

    def __init__(self) -> None:
        self.stale = True
        self.words: dict[str, frozenset[str]] = {}
        self.prefixes: dict[str, frozenset[str]] = {}
        self.prefix_lengths: tuple[int, ...] = ()
        self.phrases: dict[str, frozenset[str]] = {}
        #: the first words of the phrases: a phrase is looked up only where one starts
        self.phrase_starts: frozenset[str] = frozenset()
        self.cjk: tuple[tuple[str, str], ...] = ()
        #: word → the cues its word and prefix entries name, as `word_hits` found them: a fleet's
        #: insights share a vocabulary, and a word looked up once is one dict read after (bounded:
        #: cleared when it holds `MAX_KNOWN_WORDS`, and at every build)
        self.known: dict[str, frozenset[str]] = {}

    def word_hits(self, w: str) -> frozenset[str]:
        """The cues word `w` hits as a word or by a prefix."""
        found = self.known.get(w)
        if found is not None:
            return found
        hits = self.words.get(w, frozenset())
        size = len(w)
        for n in self.prefix_lengths:
            if size < n:
                break
            more = self.prefixes.get(w[:n])
            if more:
                hits = hits | more
        if len(self.known) >= MAX_KNOWN_WORDS:
            self.known.clear()
        self.known[w] = hits
        return hits

    def build(self) -> None:
        words: dict[str, set[str]] = {}
        prefixes: dict[str, set[str]] = {}
        phrases: dict[str, set[str]] = {}
        cjk: list[tuple[str, str]] = []
        for c in _REGISTRY:
            for w in c.words:
                words.setdefault(w, set()).add(c.name)
            for p in c.prefixes:
                prefixes.setdefault(p, set()).add(c.name)
            for ph in c.phrases:
                phrases.setdefault(ph, set()).add(c.name)
            cjk.extend((sub, c.name) for sub in c.cjk)
        self.words = {k: frozenset(v) for k, v in words.items()}
        self.prefixes = {k: frozenset(v) for k, v in prefixes.items()}
        self.prefix_lengths = tuple(sorted({len(p) for p in prefixes}))
        self.phrases = {k: frozenset(v) for k, v in phrases.items()}
        self.phrase_starts = frozenset(ph.split(" ", 1)[0] for ph in phrases)
        self.cjk = tuple(cjk)
        self.known = {}
        self.stale = False


_INDEX = _Index()


class Analysis:
    """One text, tokenised once; `hits` holds the name of every cue it contains."""

    __slots__ = ("has_cjk", "hits", "text", "tokens", "words")

    def __init__(self, text: str) -> None:
        if _INDEX.stale:
            _INDEX.build()
        self.text = text = segment.nfc(text)  # as tokens are read: a CJK cue matches decomposed kana too
        self.tokens = segment.tokens(text)
        self.words = frozenset(self.tokens)
        self.has_cjk = segment.has_cjk(text)
        hits: set[str] = set()
        known, word_hits = _INDEX.known, _INDEX.word_hits
        for w in self.words:
            found = known.get(w)
            if found is None:
                found = word_hits(w)
            if found:
                hits |= found
        toks, phrases, starts = self.tokens, _INDEX.phrases, _INDEX.phrase_starts
        for i in range(len(toks) - 1):
            if toks[i] not in starts:
                continue
            found = phrases.get(f"{toks[i]} {toks[i + 1]}")
            if found:
                hits |= found
            if i + 2 < len(toks):
                found = phrases.get(f"{toks[i]} {toks[i + 1]} {toks[i + 2]}")
                if found:
                    hits |= found
        if self.has_cjk:
            hits.update(name for sub, name in _INDEX.cjk if sub in text)
        self.hits = frozenset(hits)

    def hit(self, c: Cue) -> bool:
        return c.name in self.hits


# ---------------------------------------------------------------------------- categories (priority order)
CATEGORY_CUES: tuple[tuple[str, Cue], ...] = (
    (
        "gotcha",
        cue(
            "gotcha",
            "gotcha beware careful caveat trap surprising surprisingly unexpected unexpectedly counterintuitive",
            phrases=("watch out", "counter intuitive"),
            cjk="注意 小心 陷阱 意外 坑",
        ),
    ),
    (
        "constraint",
        cue(
            "constraint",
            "must never always cannot forbidden maximum minimum limit",
            phrases=(
                "do not",
                "don t",
                "should not",
                "shouldn t",
                "can t",
                "not allowed",
                "at most",
                "at least",
                "no more than",
                "no less than",
                "must not",
                "mustn t",
            ),
            cjk="必须 禁止 不要 不能 不得 务必 不可 至多 至少 上限 下限",
        ),
    ),
    (
        "postmortem",
        cue(
            "postmortem",
            "fail failed fails failure crash crashed crashes broke broken dropped slipped collided collision "
            "aborted postmortem",
            phrases=("went wrong",),
            cjk="失败 掉落 滑落 碰撞 故障 事故",
        ),
    ),
    (
        "root_cause",
        cue(
            "root_cause",
            "because therefore",
            phrases=("caused by", "due to", "root cause", "the reason", "as a result"),
            cjk="因为 由于 导致 原因",
        ),
    ),
    (
        "procedure",
        cue("procedure", "procedure afterwards steps", phrases=("followed by", "step 1"), cjk="步骤 然后 首先"),
    ),
    (
        "decision",
        cue(
            "decision",
            "decided chose choose opted",
            phrases=("instead of", "switched to", "went with"),
            cjk="决定 选择 改用",
        ),
    ),
    (
        "preference",
        cue(
            "preference",
            "prefer preferred prefers best ideal ideally",
            phrases=("better than",),
            cjk="优先 更好 最好 最佳",
        ),
    ),
)

# ---------------------------------------------------------------------------- domain tags
TAG_CUES: tuple[tuple[str, Cue], ...] = (
    ("grasp", cue("tag:grasp", "pick picked picking pinch", "grasp grip", cjk="抓 夹 拿")),
    ("place", cue("tag:place", "put place placed placing", "stack insert", ("drop off",), cjk="放置 放下 摆放")),
    (
        "navigation",
        cue("tag:navigation", "path route corridor elevator waypoint map", "navigat door", cjk="导航 路径 走廊"),
    ),
    (
        "manipulation",
        cue("tag:manipulation", "open opened opening close closed closing", "push pull rotat turn", cjk="推 拉 旋转"),
    ),
    ("inspection", cue("tag:inspection", "gauge meter", "inspect check", ("read the",), cjk="检查 巡检")),
    ("force", cue("tag:force", "force torque newton newtons pressure nm", cjk="力 扭矩 压力")),
    (
        "vision",
        cue("tag:vision", "camera image vision visual see lighting glare depth", "detect", cjk="视觉 相机 图像 识别"),
    ),
    ("tactile", cue("tag:tactile", "touch tactile contact friction", "slip", cjk="触觉 接触 摩擦")),
    ("calibration", cue("tag:calibration", "offset", "calibrat drift", cjk="标定 校准 漂移")),
    ("safety", cue("tag:safety", "safe safety human person people emergency", "hazard", cjk="安全 行人 危险")),
    ("battery", cue("tag:battery", "battery", "charg dock", cjk="电池 充电")),
    ("timing", cue("tag:timing", "timeout before after second seconds ms", "wait delay", cjk="等待 超时 延迟")),
)

# ---------------------------------------------------------------------------- confidence and dedup cues
CAUSAL = cue("causal", "because therefore", phrases=("caused by", "due to", "so that"), cjk="因为 由于 所以 导致")
HEDGE = cue(
    "hedge",
    "maybe might perhaps possibly probably seems seem unclear guess",
    phrases=("not sure",),
    cjk="可能 也许 大概 似乎 不确定",
)
#: "unless" and "except" are here too: they turn an instruction's condition around ("grasp the rim
#: unless it is hot" is not "grasp the rim when it is hot"). Apostrophe-less contractions ("dont")
#: are words. Korean 안 and 못 count only standing alone before the verb (안전 is "safety"), and
#: 못하…/마세요/말고 by the bigram tokens they begin (`segment.tokens`); 않 and Japanese ない, ません
#: are substrings.
NEGATION = cue(
    "negation",
    "not no never none nor without avoid cannot neither unless except "
    "dont doesnt didnt cant wont isnt arent wasnt werent shouldnt mustnt couldnt wouldnt hasnt havent hadnt "
    "не нет никогда nicht nie niemals kein keine keinen nunca jamais pas sans sin "
    "안 못 못하 못해 못했 못한 못합 못할 마세 마십 말고",
    phrases=(
        "don t",
        "doesn t",
        "didn t",
        "won t",
        "isn t",
        "aren t",
        "wasn t",
        "weren t",
        "shouldn t",
        "mustn t",
        "can t",
        "couldn t",
        "wouldn t",
        "hasn t",
        "haven t",
        "hadn t",
    ),
    cjk="不 没 别 未 勿 无 非 않 ない ません",
)
SUCCESS = cue(
    "success",
    "succeed succeeded succeeds success successful successfully worked works ok",
    phrases=("work well",),
    cjk="成功 有效",
)
FAILURE = cue(
    "failure",
    "fail failed fails failure unsuccessful unsuccessfully slipped dropped broke collided",
    phrases=("didn t work", "does not work", "did not work"),
    cjk="失败 无效 掉落",
)
UNITS = frozenset(("n", "nm", "mm", "cm", "m", "kg", "g", "s", "ms", "deg", "hz", "rad"))


def has_measurement(a: Analysis) -> bool:
    """A number with a unit (``12.5N``, ``30 deg``) or a ``key=value`` parameter."""
    toks = a.tokens
    for i, t in enumerate(toks):
        if t[0].isdigit():
            unit = t.lstrip("0123456789")
            if unit in UNITS or (not unit and i + 1 < len(toks) and toks[i + 1] in UNITS):
                return True
    return "=" in a.text and any(ch.isdigit() for ch in a.text.split("=", 1)[1][:3])


# ---------------------------------------------------------------------------- quantities (dedup facts)
def _table(spec: str) -> dict[str, str]:
    """``"s: sec secs second seconds; ms: …"`` → every spelling (lower case) → its canonical unit."""
    out: dict[str, str] = {}
    for entry in spec.split(";"):
        canonical, _, spellings = entry.partition(":")
        for spelling in (canonical.strip(), *spellings.split()):
            out[spelling.lower()] = canonical.strip()
    return out


#: The units a number is recorded with (`dedup.numbers`): "5 seconds" is ``5 s``, not "5 minutes"
#: (``5 min``). Looked up in lower case, so the table stays free of case pairs such as "N"/"n";
#: prefixed SI forms are listed only where robots write them. Han spellings count when they open
#: the run that follows the number (夹爪力12牛顿…).
UNIT_NAMES: dict[str, str] = _table(
    "s: sec secs second seconds 秒; ms: msec msecs millisecond milliseconds 毫秒; "
    "us: µs μs microsecond microseconds; min: mins minute minutes 分钟; h: hr hrs hour hours 小时; "
    "mm: millimeter millimeters millimetre millimetres 毫米; cm: centimeter centimeters centimetre centimetres 厘米; "
    "m: meter meters metre metres 米; km: kilometer kilometers kilometre kilometres 公里; "
    "in: inch inches; ft: foot feet; "
    "N: newton newtons 牛 牛顿; kN: kilonewton kilonewtons; mN: millinewton millinewtons; "
    "Nm: newtonmeter newtonmeters 牛米; "
    "deg: ° degs degree degrees 度; degC: °c celsius; degF: °f fahrenheit; rad: rads radian radians; "
    "kg: kgs kilogram kilograms kilo kilos 千克 公斤; g: gram grams 克; "
    "%: percent pct; Hz: hertz; kHz: kilohertz; rpm; V: volt volts; mA: milliamp milliamps; "
    "A: amp amps ampere amperes; W: watt watts; Pa: pascal pascals; kPa; bar; psi; px: pixel pixels"
)
#: Spellings that are units only glued to their number ("3in", "2A"): written apart they are nearly
#: always words ("put 3 in the box", "take 2 a day").
SPACED_UNIT_EXCLUDED = frozenset({"in", "a", "us"})


def _spelled(spec: str) -> list[str]:
    return spec.split()


#: English number words (`dedup.numbers`): "wait five seconds" is ``5 s``, not "ten seconds".
_UNITS_AND_TEENS = _spelled(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
)
_TENS = _spelled("twenty thirty forty fifty sixty seventy eighty ninety")
NUMBER_WORDS: dict[str, int] = {w: i for i, w in enumerate(_UNITS_AND_TEENS)} | {
    w: 10 * i for i, w in enumerate(_TENS, 2)
}
SCALE_WORDS: dict[str, int] = {"hundred": 100, "thousand": 1000}

# ---------------------------------------------------------------------------- opposites (dedup judge)


def _pairs(spec: str) -> dict[str, frozenset[str]]:
    """``"increase/decrease left/right …"`` → each word → the words opposite it (both ways)."""
    out: dict[str, set[str]] = {}
    for pair in spec.split():
        a, b = pair.split("/")
        out.setdefault(a, set()).add(b)
        out.setdefault(b, set()).add(a)
    return {k: frozenset(v) for k, v in out.items()}


#: Word pairs of opposite meaning. Two texts that differ only by swapping one for the other share
#: nearly every word, so Jaccard calls them duplicates: `dedup.conflicting` says they are not.
#: Inflected forms are listed, not derived: the table stays small and exact.
OPPOSITES: dict[str, frozenset[str]] = _pairs(
    """
    increase/decrease increases/decreases increased/decreased increasing/decreasing
    raise/lower raises/lowers raised/lowered raising/lowering
    left/right leftward/rightward leftwards/rightwards leftmost/rightmost
    clockwise/counterclockwise clockwise/anticlockwise cw/ccw
    hot/cold warm/cold hotter/colder warmer/colder heat/cool heated/cooled heating/cooling
    open/close open/shut opens/closes opened/closed opening/closing
    push/pull pushes/pulls pushed/pulled pushing/pulling
    up/down upward/downward upwards/downwards upper/lower uphill/downhill
    above/below over/under before/after inside/outside in/out into/out inner/outer inward/outward
    inwards/outwards internal/external
    min/max minimum/maximum minimal/maximal minimise/maximise minimize/maximize
    more/less more/fewer most/least
    fast/slow faster/slower fastest/slowest quick/slow quickly/slowly
    high/low higher/lower highest/lowest
    enable/disable enables/disables enabled/disabled enabling/disabling
    on/off start/stop starts/stops started/stopped starting/stopping
    forward/backward forwards/backwards forward/back front/back front/rear front/behind ahead/behind
    top/bottom light/heavy lighter/heavier wet/dry soft/hard softer/harder
    tight/loose tighter/looser tighten/loosen tightened/loosened
    attach/detach attached/detached include/exclude add/remove accept/reject
    allow/forbid allow/deny allowed/forbidden always/never
    success/failure succeeded/failed succeed/fail true/false
    first/last near/far nearer/farther closer/farther nearest/farthest closest/farthest
    north/south east/west horizontal/vertical horizontally/vertically positive/negative
    big/small large/small bigger/smaller larger/smaller long/short longer/shorter
    wide/narrow wider/narrower thick/thin strong/weak stronger/weaker
    early/late earlier/later enter/exit entry/exit entrance/exit
    grasp/release grip/release hold/release press/release lift/drop
    full/empty clean/dirty bright/dark brighter/darker
    """
)
#: Han characters of opposite meaning: a word only one text has (左手) holding one, a word only
#: the other has (右手) holding its opposite.
CJK_OPPOSITES: dict[str, frozenset[str]] = _pairs(
    "左/右 上/下 前/后 内/外 里/外 开/关 增/减 加/减 高/低 快/慢 大/小 多/少 冷/热 推/拉 轻/重 松/紧 先/后"
)
#: Prefixes that turn a word into its opposite (safe/unsafe, connect/disconnect); the stem left
#: must be at least `NEGATING_STEM` letters, so "undo"/"do" or "into"/"to" prove nothing.
NEGATING_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "non", "anti", "counter")
NEGATING_STEM = 3
#: The same prefixes written apart ("counter-clockwise" is the tokens counter, clockwise).
NEGATING_WORDS = frozenset({"counter", "anti", "non"})
#: Words that make a text a sequence of steps: with one, the order of the steps is part of the
#: meaning ("open the door, then press the button" is not the reverse).
SEQUENCE_WORDS = frozenset(
    _spelled(
        "then before after afterwards afterward first firstly finally followed next later lastly until "
        "subsequently prior 然后 首先 之后 以后 之前 以前 最后 接着 随后 先"
    )
)

#: The only words two texts of one experience may differ by (`dedup.content_sequence`): the
#: articles and "please", which change nothing a sentence says. Not pronouns ("his"/"her"
#: medication), not "be"/"have"/"do" or "to" ("has been charged" / "has to be charged"), not a
#: particle (的, 了): each of those can be all that tells two experiences apart.
FILLER_WORDS = frozenset({"a", "an", "the", "please"})

__all__ = [
    "CATEGORY_CUES",
    "CAUSAL",
    "CJK_OPPOSITES",
    "FAILURE",
    "FILLER_WORDS",
    "HEDGE",
    "NEGATING_PREFIXES",
    "NEGATING_STEM",
    "NEGATING_WORDS",
    "NEGATION",
    "NUMBER_WORDS",
    "OPPOSITES",
    "SCALE_WORDS",
    "SEQUENCE_WORDS",
    "SPACED_UNIT_EXCLUDED",
    "SUCCESS",
    "TAG_CUES",
    "UNIT_NAMES",
    "Analysis",
    "Cue",
    "cue",
    "has_measurement",
]
