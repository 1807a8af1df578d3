"""The experience-recall evaluation: a seeded corpus of robot-experience memories and the recall
cases over it, written for this project (no public dataset; SayCan, CALVIN and RLBench language
data are never used here).

The fill is a workcell's log: tasks (push, pick, place, stack, insert, screw, wipe, sort, scan,
open) on coloured parts at fixtures, with outcomes and causes, and — on about half of them —
identifiers as robots and operators write them: error codes (``E-4471``), part numbers
(``PN-20931-B``), serials (``SN-7QK2118``) and lab tags (made-up lower-case words such as
``qwkzjvb``). Common codes recur across many memories, as they do in a real log.

Four families of cases, each with one target memory:

- ``token``: a short task description naming a token planted in that memory only ("push red cube
  fixture qwkzjvb"); the task words are shared with dozens of others (the hard negatives).
- ``code``: a question naming the error code, part number or serial of a ``token`` case's
  memory among words that memory does not hold ("what went wrong with E-4471").
- ``exact``: the full text of a stored memory.
- ``hard``: task, colour, object and outcome described; planted beside it, memories of the same
  task with another colour, another object or the other outcome.
- ``paraphrase``: a question sharing few words with its memory, where vectors help.

Deterministic for a seed; `tests/experiences/test_recall_exact_tokens.py` and
`bench/eval_recall.py` use it.
"""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Family = Literal["token", "code", "exact", "hard", "paraphrase"]
FAMILIES: tuple[Family, ...] = ("token", "code", "exact", "hard", "paraphrase")

VERBS = {
    "push": "push the {c} {o} to the {f}",
    "pick": "pick the {c} {o} from the {f}",
    "place": "place the {c} {o} on the {f}",
    "stack": "stack the {c} {o} on the {f}",
    "insert": "insert the {c} {o} into the {f}",
    "screw": "screw the {c} {o} onto the {f}",
    "wipe": "wipe the {c} {o} at the {f}",
    "sort": "sort the {c} {o} into the {f}",
    "scan": "scan the {c} {o} at the {f}",
    "open": "open the {c} {o} next to the {f}",
}
OBJECTS = (
    "cube", "peg", "bolt", "bracket", "gear", "panel", "valve", "hose", "crate", "tote", "bin", "drawer",
    "cylinder", "washer", "nut", "flange", "cap", "tube", "housing", "spring",
)  # fmt: skip
COLOURS = ("red", "blue", "green", "yellow", "black", "white", "orange", "grey")
FIXTURES = (
    "fixture", "jig", "tray", "conveyor", "rack", "bench", "pallet", "kitting table", "vise", "feeder",
    "outfeed chute", "test stand",
)  # fmt: skip
CAUSES = (
    "the vacuum seal leaked", "the part was misaligned by 3 mm", "the torque limit tripped",
    "the camera lost the fiducial", "the conveyor was still moving", "the gripper fingers were worn",
    "the part was greasy", "the fixture clamp stayed closed", "a safety scanner zone was breached",
    "the wrist cable snagged",
)  # fmt: skip
FORMS = (
    "{task} succeeded at {speed} m/s with {force} N",
    "{task} failed because {cause}",
    "tried to {task}; it failed: {cause}",
    "to {task}, slow down to {speed} m/s and keep the force under {force} N",
    "{task} worked on the second attempt after {cause}",
    "{task}: grip {force} N, approach {angle} deg, done in {secs} s",
)
#: Memories of the same task at the same fixture planted beside each token case's target.
TOKEN_SIBLINGS = 6
#: How a ``code`` case asks about an identifier.
QUESTIONS = (
    "what went wrong with {}",
    "robot reported {} during the shift",
    "how to fix {} on the cell",
    "{} again",
)
#: Codes a real log repeats: many memories share them.
COMMON_CODES = ("E-1001", "E-2040", "E-3150", "W-0007", "E-4100")

#: Hand-written (memory, question) pairs: the question says it in other words.
PARAPHRASES = (
    ("the suction cup lost vacuum on the dusty cardboard carton", "why did the vacuum gripper drop the box"),
    ("the arm stopped moving when a person stepped into the light curtain", "robot halted because someone walked in"),
    ("camera images were washed out by sunlight through the skylight", "glare from the window blinded the vision"),
    ("the gripper pads are worn smooth and parts slide out", "fingers need replacing since objects slip"),
    ("the mobile base got stuck on the cable ramp near the dock", "wheels could not climb the bump by the charger"),
    ("the screwdriver bit stripped the screw head after over-torque", "too much torque ruined the screw"),
    ("liquid spilled when the cup was tilted too fast", "pouring quickly made the drink splash"),
    ("the battery drained to 5 percent during the night shift", "the robot ran out of charge overnight"),
    ("the label printer jammed and the tote left without a label", "a box was shipped unlabelled after a paper jam"),
    ("the door handle was turned the wrong way and stayed latched", "could not open the door because of the latch"),
    ("the lidar was confused by the mirror in the corridor", "a reflective wall fooled the laser scanner"),
    ("the conveyor belt slipped when the load exceeded 20 kg", "heavy loads make the belt skid"),
    ("ice built up on the freezer shelf and the tray stuck", "frost glued the tray in the cold storage"),
    ("the wrist camera fogged up after leaving the cold room", "condensation on the lens after the freezer"),
    (
        "a loose bolt made the end effector wobble during fast moves",
        "the tool shakes at high speed since a screw is loose",
    ),
    ("the robot mistook a white tablecloth for free floor space", "it drove onto the table cover, taking it for floor"),
)


@dataclass(frozen=True)
class Item:
    insight: str
    context: dict[str, Any]


@dataclass(frozen=True)
class Case:
    family: Family
    query: str
    target: str  # the target memory's text


@dataclass(frozen=True)
class Eval:
    items: list[Item]
    cases: list[Case]

    def of(self, family: Family) -> list[Case]:
        return [c for c in self.cases if c.family == family]


def _tag(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(7))


def _identifier(rng: random.Random, kind: int) -> str:
    if kind == 0:
        return f"E-{rng.randrange(1000, 10000)}"
    if kind == 1:
        return f"PN-{rng.randrange(10000, 100000)}-{rng.choice('ABCDEFGH')}"
    if kind == 2:
        chars = string.ascii_uppercase + string.digits
        return "SN-" + "".join(rng.choice(chars) for _ in range(7))
    return _tag(rng)


def _mention(ident: str, kind: int) -> str:
    return ("error code {}", "part number {}", "serial {}", "lab tag {}")[kind].format(ident)


def _text(rng: random.Random, verb: str, c: str, o: str, f: str, form: int | None = None) -> tuple[str, bool]:
    task = VERBS[verb].format(c=c, o=o, f=f)
    k = rng.randrange(len(FORMS)) if form is None else form
    text = FORMS[k].format(
        task=task,
        cause=rng.choice(CAUSES),
        speed=round(rng.uniform(0.05, 1.0), 2),
        force=round(rng.uniform(2.0, 40.0), 1),
        angle=rng.randrange(0, 91, 5),
        secs=round(rng.uniform(1.0, 30.0), 1),
    )
    return text[0].upper() + text[1:], k not in (1, 2)


def _context(rng: random.Random, verb: str, o: str, success: bool, source: str | None = None) -> dict[str, Any]:
    if source is None:
        source = "real" if rng.random() < 0.3 else "sim"
    return {
        "task": {"name": verb, "object": o, "success": success, "source": source},
        "robot": {"id": rng.choice(("cell-arm-1", "cell-arm-2", "amr-3"))},
    }


def generate(n: int = 1200, cases_per_family: int = 20, seed: int = 20261202) -> Eval:
    """`n` memories (the planted ones included) and `cases_per_family` cases of each family."""
    rng = random.Random(seed)
    used: set[str] = set()
    planted: list[Item] = []
    cases: list[Case] = []
    hard_keys: set[tuple[str, str, str]] = set()
    questions: list[Case] = []

    def add(to: list[Item], text: str, ctx: dict[str, Any]) -> bool:
        if text.casefold() in used:
            return False
        used.add(text.casefold())
        to.append(Item(text, ctx))
        return True

    # token: a planted memory naming a unique identifier; its task words are common.
    for i in range(cases_per_family):
        kind = i % 4
        verb, c, o, f = rng.choice(list(VERBS)), rng.choice(COLOURS), rng.choice(OBJECTS), rng.choice(FIXTURES)
        ident = _identifier(rng, kind)
        while ident.casefold() in used:
            ident = _identifier(rng, kind)
        used.add(ident.casefold())
        text, ok = _text(rng, verb, c, o, f)
        text = f"{text}; {_mention(ident, kind)}"
        add(planted, text, _context(rng, verb, o, ok))
        cases.append(Case("token", f"{verb} {c} {o} {f.split()[0]} {ident}", text))
        if kind < 3:  # a lab tag is no identifier a question would name
            questions.append(Case("code", QUESTIONS[len(questions) % len(QUESTIONS)].format(ident), text))
        for _ in range(TOKEN_SIBLINGS):  # the same task at the same fixture, without the token
            sibling, ok = _text(rng, verb, c, o, f)
            if rng.random() < 0.5:
                sibling += f"; {_mention(rng.choice(COMMON_CODES), 0)}"
            add(planted, sibling, _context(rng, verb, o, ok))
    # hard: the target and, beside it, the same task with one thing changed
    for _ in range(cases_per_family):
        while True:
            verb, c, o, f = rng.choice(list(VERBS)), rng.choice(COLOURS), rng.choice(OBJECTS), rng.choice(FIXTURES)
            if (verb, c, o) not in hard_keys:
                break
        hard_keys.add((verb, c, o))
        cause = rng.choice(CAUSES)
        task = VERBS[verb].format(c=c, o=o, f=f)
        target = f"{task[0].upper()}{task[1:]} failed because {cause}"
        # one source for the case's memories: relevance decides between them, not the source weight
        source = rng.choice(("real", "sim"))
        add(planted, target, _context(rng, verb, o, False, source))
        other_c = rng.choice([x for x in COLOURS if x != c])
        other_o = rng.choice([x for x in OBJECTS if x != o])
        for neg, ok in (
            (VERBS[verb].format(c=other_c, o=o, f=f) + f" failed because {cause}", False),
            (VERBS[verb].format(c=c, o=other_o, f=f) + f" failed because {cause}", False),
            (task + f" succeeded even though {cause}", True),
        ):
            add(planted, neg[0].upper() + neg[1:], _context(rng, verb, o, ok, source))
        cases.append(Case("hard", f"why did {verb} the {c} {o} fail", target))
    # paraphrase
    for memory, question in PARAPHRASES[:cases_per_family]:
        add(planted, memory[0].upper() + memory[1:], _context(rng, "inspect", "cell", False))
        cases.append(Case("paraphrase", question, memory[0].upper() + memory[1:]))
    # the fill: the rest of the log; identifiers on about half, common codes recurring
    fill: list[Item] = []
    while len(planted) + len(fill) < n:
        verb, c, o, f = rng.choice(list(VERBS)), rng.choice(COLOURS), rng.choice(OBJECTS), rng.choice(FIXTURES)
        if (verb, c, o) in hard_keys:  # a hard case's target must stay the only one of its kind
            continue
        text, ok = _text(rng, verb, c, o, f)
        r = rng.random()
        if r < 0.25:
            text += f"; {_mention(rng.choice(COMMON_CODES), 0)}"
        elif r < 0.5:
            kind = rng.randrange(4)
            ident = _identifier(rng, kind)
            if ident.casefold() in used:
                continue
            used.add(ident.casefold())
            text += f"; {_mention(ident, kind)}"
        add(fill, text, _context(rng, verb, o, ok))
    # exact: the full text of stored memories of the fill
    for item in rng.sample(fill, cases_per_family):
        cases.append(Case("exact", item.insight, item.insight))
    cases += questions
    items = planted + fill
    rng.shuffle(items)
    return Eval(items, cases)


def metrics(ranks: Sequence[int | None], k: int = 5) -> tuple[float, float, float]:
    """hit@1, hit@k and MRR over the top 10 of 1-based ranks (None: not returned)."""
    n = len(ranks) or 1
    return (
        sum(r == 1 for r in ranks) / n,
        sum(r is not None and r <= k for r in ranks) / n,
        sum(1.0 / r for r in ranks if r is not None and r <= 10) / n,
    )


__all__ = ["FAMILIES", "PARAPHRASES", "Case", "Eval", "Family", "Item", "generate", "metrics"]
