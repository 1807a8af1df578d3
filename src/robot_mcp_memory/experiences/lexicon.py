"""The cue words behind classification and dedup, and one pass of text analysis to test them.

A `Cue` is a set of words (``because``), word prefixes (``grasp`` → grasping, grasped), token
phrases of two or three words (``do not``; an apostrophe splits like FTS5 does, so "don't" is
``don t``) and CJK substrings (``因为``). All cues compile into one index; `Analysis` tokenises a
text once (`search.segment.tokens`) and finds every cue it contains in one pass of dictionary
lookups — no per-rule regular expression scans, so classifying an insight and extracting its
decisive facts stays in the tens of microseconds.
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


class _Index:
    """word → cue names, prefix → cue names, phrase → cue names (built once, on first use)."""

    def __init__(self) -> None:
        self.stale = True
        self.words: dict[str, frozenset[str]] = {}
        self.prefixes: dict[str, frozenset[str]] = {}
        self.prefix_lengths: tuple[int, ...] = ()
        self.phrases: dict[str, frozenset[str]] = {}
        self.cjk: tuple[tuple[str, str], ...] = ()

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
        self.cjk = tuple(cjk)
        self.stale = False


_INDEX = _Index()


class Analysis:
    """One text, tokenised once; `hits` holds the name of every cue it contains."""

    __slots__ = ("has_cjk", "hits", "text", "tokens", "words")

    def __init__(self, text: str) -> None:
        if _INDEX.stale:
            _INDEX.build()
        self.text = text
        self.tokens = segment.tokens(text)
        self.words = frozenset(self.tokens)
        self.has_cjk = segment.has_cjk(text)
        hits: set[str] = set()
        words, prefixes, lengths = _INDEX.words, _INDEX.prefixes, _INDEX.prefix_lengths
        for w in self.words:
            found = words.get(w)
            if found:
                hits |= found
            for n in lengths:
                if len(w) < n:
                    break
                found = prefixes.get(w[:n])
                if found:
                    hits |= found
        toks, phrases = self.tokens, _INDEX.phrases
        for i in range(len(toks) - 1):
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
NEGATION = cue(
    "negation",
    "not no never none nor without avoid cannot neither не нет никогда nicht nie niemals kein keine keinen "
    "nunca jamais pas sans sin",
    phrases=("don t", "doesn t", "didn t", "won t", "isn t", "aren t", "wasn t", "shouldn t", "mustn t", "can t"),
    cjk="不 没 别 未 勿 无 非",
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


__all__ = [
    "CATEGORY_CUES",
    "CAUSAL",
    "FAILURE",
    "HEDGE",
    "NEGATION",
    "SUCCESS",
    "TAG_CUES",
    "Analysis",
    "Cue",
    "cue",
    "has_measurement",
]
