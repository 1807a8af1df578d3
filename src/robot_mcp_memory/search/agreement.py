"""Query-term agreement: whether a document names another value of a slot the query fills.

Near-identical process documents differ by one word — a colour, a direction, a position, a count,
on or off — and both search legs are weak exactly there: the keyword leg drops ``up``, ``on``
and ``off`` as function words and scores "turn the red block left" almost as high as "… right"
for "turn the red block right", and sentence embeddings put such documents within a hair of each
other. A small lexicon of contrast sets settles it: every word it knows names a *value* of a
*slot* (``red`` → colour ``red``; ``minus`` → amount ``less``; ``三楼`` → number ``3``). A document
**contradicts** a query in a slot when both name values of it and none of the document's is one
of the query's ("rotate the blue block" against "… red block": colour {blue} vs {red}); naming
none (a generic "Turn the block") or sharing one ("red and blue blocks") is no contradiction.

`factor` is the relevance multiplier the ranking applies: ``DEMOTION`` per contradicted slot,
``SILENCE`` per slot the document names no value of, 1.0 when it names a value the query names
in every slot the query fills. It never promotes: a document that agrees keeps the relevance
its legs gave it. Pure functions on tokens (`segment.tokens` splits English into words and
Chinese into jieba words); no storage, no model.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping

from robot_mcp_memory.search.segment import tokens

#: A slot and the values a text names in it.
Slots = Mapping[str, frozenset[str]]

#: The relevance multiplier per slot in which a document contradicts the query: low enough that a
#: contradicting near-duplicate falls below the document that names the query's value even when
#: it is several times as reliable; not zero, so a document still ranks when the lexicon misreads.
DEMOTION = 0.2
#: The multiplier per slot the query names and a document names no value of (a generic "Take
#: the elevator" for "take the lift to floor 3"): such a document may be the one asked for, so it
#: stays far above a contradicting one, but the one naming the query's value ("… to floor 3")
#: passes it where the legs scored the two alike (the value: docs/search.md, Evaluation).
SILENCE = 0.8

_EN = {
    "colour": {
        "red": "red crimson scarlet maroon",
        "blue": "blue navy azure",
        "green": "green lime olive",
        "yellow": "yellow",
        "black": "black",
        "white": "white",
        "orange": "orange",
        "purple": "purple violet",
        "pink": "pink",
        "brown": "brown",
        "grey": "grey gray",
        "silver": "silver",
        "gold": "gold golden",
    },
    "side": {"left": "left leftward leftwards lefthand", "right": "right rightward rightwards righthand"},
    "rotation": {"cw": "clockwise", "ccw": "counterclockwise anticlockwise"},
    "amount": {
        "more": "up upward upwards upstairs plus increase raise higher louder more next brighter faster ascend",
        "less": "down downward downwards downstairs minus decrease lower quieter less previous dimmer slower descend",
    },
    "position": {
        "top": "top topmost uppermost upper highest",
        "middle": "middle centre center central mid",
        "bottom": "bottom bottommost lowest lower",
    },
    "power": {"on": "start", "off": "off stop"},
    "door": {"open": "open opened opening", "closed": "close closed closing shut"},
    "size": {"big": "big large huge giant", "small": "small little tiny mini"},
    "heat": {"hot": "hot warm heated", "cold": "cold iced chilled frozen"},
    # Object identity: what is handled, in two slots, so that "put the ball in the box" is
    # contradicted by "… the cube in the box" (shape) though both name the box.
    "shape": {
        "ball": "ball balls sphere spheres orb",
        "cube": "cube cubes block blocks",
        "cylinder": "cylinder cylinders",
        "ring": "ring rings",
        "pyramid": "pyramid pyramids cone cones",
    },
    # What came of a task: an experience that failed is contradicted by one that succeeded.
    "outcome": {
        "failure": "fail fails failed failing failure failures unsuccessful",
        "success": "succeed succeeds succeeded success successful successfully",
    },
    # Into a container or out of it: "load the dishes into the dishwasher" against "unload …".
    # "out" names it only after a taking verb (`_TAKING`): "the printer is out of paper" asks
    # for paper to be put in; "in" and "inside" only after a placing verb (`_PLACING`): "put
    # the money in the safe", not "wait in the kitchen". No -ing form ("a loading dock" is a
    # place), no "pack" (a battery pack is a thing); the verbs are `_GUARDED`.
    "containment": {
        "in": "into load loads loaded insert inserts inserted",
        "out": "unload unloads unloaded remove removes removed unpack unpacks unpacked emptied",
    },
    "tool": {
        "screwdriver": "screwdriver screwdrivers",
        "wrench": "wrench wrenches spanner spanners",
        "pliers": "pliers",
        "hammer": "hammer hammers",
        "drill": "drill drills",
        "scissors": "scissors",
    },
}

#: Verbs an "un-" undoes: each is a slot of its own ("reversal:lock"), "lock"/"locked" naming
#: ``do`` and "unlock"/"unlocked" ``undo``, so "unplug the kettle" is contradicted by "Plug in the
#: kettle". No -ing form: "the docking station", "a folding chair", "the mounting bracket" are
#: things. "block" and "cover", mostly things, are left out; load is containment's.
_REVERSIBLE = "dock lock plug mute stack screw wrap fold zip hook clip mount pause freeze"


def _inflections(verb: str) -> set[str]:
    """`verb` and its -s and -ed forms (a final consonant doubled or not)."""
    if verb.endswith("e"):
        return {verb, verb + "s", verb + "d"}
    return {verb, verb + "s", verb + "ed", verb + verb[-1] + "ed"}


#: Verbs after which an "out" within `TAKING_REACH` words is out of a container ("take the
#: rubbish bag out").
_TAKING_TEXT = "take takes took taken pull pulls pulled get gets got"
_TAKING = frozenset(_TAKING_TEXT.split())
#: Verbs after which an "in" or "inside" within `TAKING_REACH` words is into a container.
_PLACING_TEXT = "put puts place places placed drop drops dropped pop pops popped toss tossed stick stuff stuffed"
_PLACING = frozenset(_PLACING_TEXT.split())
TAKING_REACH = 4


#: Two words that name one value together, read before either alone: "counter-clockwise" is
#: two tokens, the second of which alone says the opposite; "power up" switches on, where "up"
#: alone is an amount.
_EN_PHRASES: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {
    ("counter", "clockwise"): (("rotation", "ccw"),),
    ("anti", "clockwise"): (("rotation", "ccw"),),
    ("power", "up"): (("power", "on"),),
    ("start", "up"): (("power", "on"),),
    ("power", "down"): (("power", "off"),),
    ("shut", "down"): (("power", "off"),),
    ("shut", "off"): (("power", "off"),),
    ("fail", "safe"): (),  # a fail-safe names no outcome
    ("拿", "出来"): (("containment", "out"),),
    ("取", "出来"): (("containment", "out"),),
}
#: Words that turn an outcome after them into its opposite: "not successful", 没成功, 不成功,
#: 没有成功; and "n't" ("didn't succeed": the tokens "didn", "t").
_NEGATORS = frozenset(["not", "never", "no", "cannot", "没", "未", "不", "没有", "不会", "不能", "没能", "未能"])
#: How many words before an outcome a negation may stand ("not a success", "not really succeed").
NEGATION_REACH = 3
_OPPOSITE_OUTCOME = {"failure": "success", "success": "failure"}
#: An ordinal in digits: 1st, 2nd, 3rd, 4th, 21st.
_ORDINAL = re.compile("^([0-9]{1,6})(?:st|nd|rd|th)$")

_NUMBER_WORDS = {
    "one": 1, "single": 1, "first": 1, "two": 2, "pair": 2, "second": 2, "three": 3, "third": 3,
    "four": 4, "fourth": 4, "five": 5, "fifth": 5, "six": 6, "sixth": 6, "seven": 7, "seventh": 7,
    "eight": 8, "eighth": 8, "nine": 9, "ninth": 9, "ten": 10, "tenth": 10, "eleven": 11,
    "twelve": 12, "dozen": 12, "twenty": 20,
}  # fmt: skip

#: Chinese words (jieba's), each with the (slot, value) pairs it names.
_ZH: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("左 左边 左侧 向左 往左 左转", (("side", "left"),)),
    ("右 右边 右侧 向右 往右 右转", (("side", "right"),)),
    ("顺时针", (("rotation", "cw"),)),
    ("逆时针", (("rotation", "ccw"),)),
    ("向上 往上 调高 调大 增大 增加 提高 升高 加大 下一个 下一台 大声 上楼", (("amount", "more"),)),
    ("向下 往下 调低 调小 减小 减少 降低 上一个 上一台 小声 下楼", (("amount", "less"),)),
    ("顶 顶层 顶部 最上面 最上 上层 上面", (("position", "top"),)),
    ("中间 中层 中部 当中", (("position", "middle"),)),
    ("底 底层 底部 最下面 最下 下层 下面", (("position", "bottom"),)),
    ("打开 开启 启动 开灯", (("power", "on"), ("door", "open"))),
    ("关掉 关闭 关上 关灯 停止", (("power", "off"), ("door", "closed"))),
    ("热 热的 加热", (("heat", "hot"),)),
    ("冷 冷的 冰 冰的", (("heat", "cold"),)),
    ("球 小球 圆球 球体", (("shape", "ball"),)),
    ("方块 方块儿 积木 立方体", (("shape", "cube"),)),
    ("圆柱 圆柱体", (("shape", "cylinder"),)),
    ("圆环 环", (("shape", "ring"),)),
    ("三角锥 锥 锥体 金字塔", (("shape", "pyramid"),)),
    ("螺丝刀 起子", (("tool", "screwdriver"),)),
    ("扳手", (("tool", "wrench"),)),
    ("钳子 老虎钳", (("tool", "pliers"),)),
    ("锤子 榔头", (("tool", "hammer"),)),
    ("电钻", (("tool", "drill"),)),
    ("剪刀", (("tool", "scissors"),)),
    ("放进 放入 装进 装入 塞进 装载", (("containment", "in"),)),
    ("取出 拿出 卸下", (("containment", "out"),)),
    ("锁上 锁好 锁门", (("reversal:lock", "do"),)),
    ("解锁 开锁", (("reversal:lock", "undo"),)),
    ("插上 插好", (("reversal:plug", "do"),)),
    ("拔掉 拔出", (("reversal:plug", "undo"),)),
    ("失败", (("outcome", "failure"),)),
    ("成功", (("outcome", "success"),)),
)
#: Chinese characters that name a value in any word holding them (红色, 红的, 向右转, 左转).
_ZH_CHARS = {
    "红": ("colour", "red"), "蓝": ("colour", "blue"), "绿": ("colour", "green"),
    "黄": ("colour", "yellow"), "黑": ("colour", "black"), "紫": ("colour", "purple"),
    "粉": ("colour", "pink"), "棕": ("colour", "brown"), "灰": ("colour", "grey"),
    "橙": ("colour", "orange"), "左": ("side", "left"), "右": ("side", "right"),
}  # fmt: skip
#: "on" is a switch position after a switching verb ("turn on the lamp") or when no noun phrase
#: follows it ("switch the fan on", "put the light on at my desk"); before one it is mostly the
#: preposition ("press minus on the remote", "put the cup on the table") and names nothing.
_SWITCHING_TEXT = "turn turns turned turning switch switches switched switching power powered flip flick"
_SWITCHING = frozenset(_SWITCHING_TEXT.split())
_DETERMINERS_TEXT = "the a an my your his her its our their this that these those each every top"
_DETERMINERS = frozenset(_DETERMINERS_TEXT.split())
_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
#: A Chinese count or ordinal as one jieba word: 三, 三个, 第三, 三楼, 十二层 (a numeral and at most
#: one measure word; 一下 "a moment" and 一起 "together" are no numbers, nor 一个, mostly "a").
_ZH_NUMBER = re.compile("^第?([零一二两三四五六七八九十]{1,3})[个楼层号块张瓶杯罐次台只件盒箱位排行列档]?$")


def _build() -> dict[str, tuple[tuple[str, str], ...]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for slot, values in _EN.items():
        for value, words in values.items():
            for w in words.split():
                out.setdefault(w, []).append((slot, value))
    for w, n in _NUMBER_WORDS.items():
        out.setdefault(w, []).append(("number", str(n)))
    for verb in _REVERSIBLE.split():
        for form in _inflections(verb):
            out.setdefault(form, []).append((f"reversal:{verb}", "do"))
            out.setdefault("un" + form, []).append((f"reversal:{verb}", "undo"))
    for words, pairs in _ZH:
        for w in words.split():
            out.setdefault(w, []).extend(pairs)
    return {w: tuple(pairs) for w, pairs in out.items()}


_LEXICON = _build()
#: The English words of containment and reversal but "into", each a verb or its participle and
#: often a thing or a state: after an article, a preposition other than "to", a form of "be" or
#: a place's -ing word (`_thing_or_state`) they name nothing — "the lock", "a stack of boxes",
#: "from dock A", "loading dock A", "the locked cabinet", "the door is locked", "drop off the load".
_GUARDED = frozenset(
    w
    for w, pairs in _LEXICON.items()
    if w.isascii() and w != "into" and any(slot == "containment" or slot.startswith("reversal:") for slot, _ in pairs)
)


def _groups() -> dict[str, frozenset[str]]:
    """Each slot's group: the slots some one word names together (关上 closes a door or switches
    something off; "lower" is less and the bottom), joined."""
    group = {slot: {slot} for pairs in _LEXICON.values() for slot, _ in pairs}
    for pairs in _LEXICON.values():
        joined = set().union(*(group[slot] for slot, _ in pairs))
        for slot in joined:
            group[slot] = joined
    return {slot: frozenset(g) for slot, g in group.items()}


#: A slot's group (`_groups`); a slot absent here is a group of its own.
_GROUP = _groups()


def _zh_number(word: str) -> int | None:
    m = _ZH_NUMBER.match(word)
    if m is None:
        return None
    digits = m.group(1)
    if digits.startswith("零"):
        return None  # 零件 is a part, not zero of anything
    if "十" not in digits:
        return _ZH_DIGITS[digits] if len(digits) == 1 else None
    tens, _, ones = digits.partition("十")
    if len(tens) > 1 or len(ones) > 1 or "十" in ones:
        return None
    return (_ZH_DIGITS[tens] if tens else 1) * 10 + (_ZH_DIGITS[ones] if ones else 0)


def _spelled(run: list[int]) -> set[str]:
    """The numbers a run of spelled numbers may mean, besides each one alone: tens and units
    added ("twenty one" → 21) and digits side by side ("three oh five" → 305)."""
    out: set[str] = set()
    if len(run) == 2 and run[0] % 10 == 0 and 20 <= run[0] <= 90 and 0 < run[1] < 10:
        out.add(str(run[0] + run[1]))
    if all(0 <= n < 10 for n in run):
        out.add(str(int("".join(map(str, run)))))
    return out


def _negated(toks: list[str], i: int) -> bool:
    """Whether a negation stands in the `NEGATION_REACH` words before `toks[i]`."""
    for j in range(max(0, i - NEGATION_REACH), i):
        tok = toks[j]
        if tok in _NEGATORS or (tok == "t" and j > 0 and toks[j - 1].endswith("n")):
            return True
    return False


#: Not "to": "to screw the bin on" is the act ("go to dock A" reads as docking, the same errand).
_PREPOSITIONS_TEXT = "from at in on into onto by near of with beside behind"
_BE_TEXT = "is are was were be been being stays stayed remains remained still"
_PLACES_TEXT = "loading charging parking shipping receiving packing sorting landing staging waiting docking"
_NOT_AN_ACT = frozenset(" ".join([_DETERMINERS_TEXT, _PREPOSITIONS_TEXT, _BE_TEXT, _PLACES_TEXT]).split())


def _thing_or_state(toks: list[str], i: int) -> bool:
    """Whether the `_GUARDED` word `toks[i]` names a thing or a state, not an act: after an
    article ("the lock"), a preposition ("from dock A"), a form of "be" ("is locked") or a
    place's -ing word ("loading dock"). A list of places, not every -ing word: "every evening,
    lock the door" is an act (tokens hold no comma)."""
    return i > 0 and toks[i - 1] in _NOT_AN_ACT


#: Particles that make a placing verb another verb before an "in": "put on your gloves in the
#: lab", "drop me off in the lobby", "put up the poster in the hall".
_PARTICLES = frozenset(["on", "off", "up"])


def _moved(toks: list[str], i: int) -> bool:
    """Whether the "out", "in" or "inside" at `toks[i]` says what was taken out or put in: a
    taking verb (for "out") or a placing verb (for "in") up to `TAKING_REACH` words before it,
    that verb an act (not "the dropped box") and, for "in", no particle between the two."""
    verbs, out = (_TAKING, True) if toks[i] == "out" else (_PLACING, False)
    return any(
        toks[j] in verbs and not _thing_or_state(toks, j) and (out or not _PARTICLES.intersection(toks[j + 1 : i]))
        for j in range(max(0, i - TAKING_REACH), i)
    )


def slots(tokens: Iterable[str]) -> dict[str, frozenset[str]]:
    """The values each slot is named with in `tokens` (lower-cased words, as `segment.tokens`
    gives them). A run of ASCII digits is a number, and so is a run of spelled numbers in every
    way it may be read ("twenty one": 20, 1 and 21): a document is contradicted only by a
    number none of those readings is. Slots no token names are absent."""
    found: dict[str, set[str]] = {}
    toks = list(tokens)
    run: list[int] = []
    skip = False
    for i, tok in enumerate(toks):
        if skip:  # the second word of a phrase read with the first
            skip = False
            continue
        spelled = _NUMBER_WORDS.get(tok, 0 if tok in ("oh", "zero") and run else None)
        if spelled is not None:
            run.append(spelled)
        elif run:
            found.setdefault("number", set()).update(_spelled(run))
            run = []
        phrase = _EN_PHRASES.get((tok, toks[i + 1])) if i + 1 < len(toks) else None
        if phrase is not None and tok == "power" and i and toks[i - 1] in _DETERMINERS:
            phrase = None  # "turn the power down": the power's amount, not a switch
        if phrase is not None:
            for slot, value in phrase:
                found.setdefault(slot, set()).add(value)
            skip = True
            continue
        if tok in ("out", "in", "inside"):
            if _moved(toks, i):
                found.setdefault("containment", set()).add("out" if tok == "out" else "in")
            continue
        if tok == "on":
            after = toks[i + 1] if i + 1 < len(toks) else None
            if (i and toks[i - 1] in _SWITCHING) or after is None or after not in _DETERMINERS:
                found.setdefault("power", set()).add("on")
            continue
        pairs = _LEXICON.get(tok)
        if pairs is None and i + 1 < len(toks) and not tok.isascii():
            pairs = _LEXICON.get(tok + toks[i + 1])  # jieba's 上 一个 is one word here: 上一个
        if pairs is not None and tok in _GUARDED and _thing_or_state(toks, i):
            pairs = None
        if pairs is not None:
            negated = _negated(toks, i)
            for slot, value in pairs:
                if slot == "outcome" and negated:
                    value = _OPPOSITE_OUTCOME[value]
                found.setdefault(slot, set()).add(value)
        elif tok.isascii():
            ordinal = _ORDINAL.match(tok)
            if tok.isdigit() and len(tok) <= 6:
                found.setdefault("number", set()).add(str(int(tok)))
            elif ordinal is not None:
                found.setdefault("number", set()).add(str(int(ordinal.group(1))))
        else:
            n = _zh_number(tok) if tok != "一个" else None
            if n is not None:
                found.setdefault("number", set()).add(str(n))
            for ch in tok:
                pair = _ZH_CHARS.get(ch)
                if pair is not None:
                    found.setdefault(pair[0], set()).add(pair[1])
    if run:
        found.setdefault("number", set()).update(_spelled(run))
    return {slot: frozenset(values) for slot, values in found.items()}


def contradictions(query: Slots, doc: Slots) -> int:
    """In how many slots `doc` names values and none of them is one the query names."""
    return sum(1 for slot, wanted in query.items() if (named := doc.get(slot)) and not named & wanted)


#: Texts whose slots `text_slots` remembers: a find checks its ~100 candidates' texts, and a
#: fleet's finds meet the same documents again and again.
TEXT_SLOTS_CACHE = 8192


#: A capital letter standing alone: "dock B", "rack A to", "A号" — not "I", and not a letter
#: of a word, an identifier or an abbreviation ("E-4471", "PN_20931_B", "Q&A", "I/O", "J. Smith").
_LETTER = re.compile(
    r"(?<![A-Za-z0-9&_/])(?<![A-Za-z0-9][-.])([A-HJ-Z])(?![A-Za-z0-9&_/])(?![-.][A-Za-z0-9])(?!\.\s*[A-Z])"
)
#: What a clause opens after: a letter there is a sentence's or a list item's first word.
_OPENERS = frozenset(".!?:;\"'“”‘’(（[【-–—•*·\n\r。！？：；")


def labels(text: str) -> frozenset[str]:
    """The letters `text` names as labels, lower-cased: the ``label`` slot. A capital letter
    standing alone (`_LETTER`) is one, but not when it opens the text, a line or a clause (an
    article: "Done. A box fell", "- A box"), follows a number (a unit: "11 V", "2 A") or is an
    "A" before a capitalised word (a title's or a shouted text's article: "Move A Pallet",
    "PICK UP A CUBE")."""
    found: set[str] = set()
    for m in _LETTER.finditer(text):
        before = text[: m.start()].rstrip(" \t")
        if not before or before[-1] in _OPENERS or before[-1].isdigit() or before[-1] == "°":
            continue
        if m.group(1) == "A" and re.match(r"[ \t]+[A-Z]", text[m.end() :]):
            continue
        found.add(m.group(1).lower())
    return frozenset(found)


@functools.lru_cache(maxsize=TEXT_SLOTS_CACHE)
def text_slots(text: str) -> Slots:
    """`slots` of the tokens of `text` (`segment.tokens`), and the letters it names as labels
    (`labels`: a case the tokens no longer hold): a pure function of the text, remembered for
    the last `TEXT_SLOTS_CACHE` texts. Read-only: the mapping is shared."""
    found = slots(tokens(text))
    named = labels(text)
    return {**found, "label": named} if named else found


def silences(query: Slots, doc: Slots) -> int:
    """How many of the slots the query names `doc` names no value of, a group of slots one word
    may name (`_GROUP`: power and door for 关上) counted once, and not at all when `doc` names
    any of the group's slots the query names: "close the fridge" answers 把冰箱关上."""
    silent = 0
    seen: set[str] = set()
    for slot in query:
        if slot in seen:
            continue
        group = _GROUP.get(slot, frozenset([slot])) & query.keys()
        seen |= group
        silent += not any(doc.get(g) for g in group)
    return silent


def factor(query: Slots, doc: Slots) -> float:
    """The relevance multiplier for `doc` under `query`: `DEMOTION` per contradicted slot and
    `SILENCE` per slot it is silent on."""
    if not query:
        return 1.0
    return float(DEMOTION ** contradictions(query, doc) * SILENCE ** silences(query, doc))


__all__ = ["DEMOTION", "SILENCE", "Slots", "contradictions", "factor", "labels", "silences", "slots", "text_slots"]
