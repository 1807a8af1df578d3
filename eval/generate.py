"""Hard-negative evaluation corpora for find_processes, generated from vocabularies written here.

    python eval/generate.py --size 40 [--out FILE]     # print (or write) one corpus as YAML

Every word below was written for this project: the templates, vocabularies, Chinese renderings
and the paraphrase documents. No public dataset or other outside text was used or paraphrased
(in particular nothing of SayCan, CALVIN or RLBench: they are the project's held-out evaluation;
the example misses quoted in issue 28 come from them, so none of those instructions appear).

A document is a template and one value per slot ("Pick up the {colour} {obj} from the
{surface} in the {room}"); its hard negatives are documents of the same template that differ in
one slot. Queries are written from the same slot values through other words (synonyms, other
verbs, Chinese), and every query names every slot of its target, so:

* the 40 core documents (`CORE`, six families: colour, direction, position, count, object,
  paraphrase) are all different tuples, and each query has exactly one right answer;
* the larger corpora add distractor documents drawn, seeded, from the same templates (a
  template first, uniformly, then an unused tuple of it), never equal to a core tuple: a
  distractor differs from every target in a slot its queries name, so each query still has one
  right answer — and most distractors are hard negatives of some target. Paraphrase documents
  use words no template does (toaster, kettle, aquarium...), so no distractor answers them.

`corpus(size)` is deterministic for a given size and seed. Documents are English except those
marked `lang: zh`; queries are English and Chinese against both.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

SEED = 28
SIZES = (40, 500, 5000)


@dataclass(frozen=True)
class Value:
    """One slot value: the document's word, the words a query may use instead, and Chinese."""

    en: str
    said: tuple[str, ...]
    zh: str


def v(en: str, zh: str, *said: str) -> Value:
    return Value(en, said or (en,), zh)


VOCAB: dict[str, tuple[Value, ...]] = {
    "colour": (
        v("red", "红色"),
        v("blue", "蓝色"),
        v("green", "绿色"),
        v("yellow", "黄色"),
        v("black", "黑色"),
        v("white", "白色"),
        v("orange", "橙色"),
        v("purple", "紫色"),
        v("pink", "粉色"),
        v("brown", "棕色"),
    ),
    "obj": (
        v("cube", "方块", "block", "cube"),
        v("ball", "球", "ball", "sphere"),
        v("cup", "杯子", "mug", "cup"),
        v("bowl", "碗"),
        v("plate", "盘子", "plate", "dish"),
        v("bottle", "瓶子"),
        v("sponge", "海绵"),
        v("cylinder", "圆柱", "cylinder", "tube"),
        v("ring", "圆环", "ring", "hoop-shaped piece"),
        v("pyramid", "三角锥", "pyramid", "cone"),
    ),
    "surface": (
        v("table", "桌子"),
        v("tray", "托盘"),
        v("shelf", "架子", "shelf", "rack shelf"),
        v("counter", "台面", "counter", "worktop"),
        v("cart", "推车", "cart", "trolley"),
        v("stool", "凳子"),
    ),
    "container": (
        v("box", "箱子", "box", "carton"),
        v("basket", "篮子"),
        v("bin", "垃圾桶", "bin", "waste bin"),
        v("drawer", "抽屉"),
        v("bucket", "水桶", "bucket", "pail"),
    ),
    "room": (
        v("kitchen", "厨房"),
        v("bedroom", "卧室"),
        v("living room", "客厅", "living room", "lounge"),
        v("office", "办公室"),
        v("lab", "实验室", "lab", "laboratory"),
        v("hallway", "走廊", "hallway", "corridor"),
        v("garage", "车库"),
        v("bathroom", "浴室", "bathroom", "washroom"),
    ),
    "appliance": (
        v("lights", "灯", "lights", "lamps"),
        v("fan", "风扇"),
        v("heater", "暖气", "heater", "radiator"),
        v("air conditioner", "空调", "air conditioner", "AC"),
        v("TV", "电视", "TV", "television"),
        v("coffee machine", "咖啡机", "coffee machine", "espresso maker"),
    ),
    "openable": (
        v("fridge", "冰箱", "fridge", "refrigerator"),
        v("window", "窗户"),
        v("cabinet", "柜子", "cabinet", "cupboard"),
        v("oven", "烤箱"),
        v("garage door", "车库门"),
    ),
    "landmark": (
        v("elevator", "电梯", "elevator", "lift"),
        v("stairs", "楼梯", "stairs", "staircase"),
        v("reception desk", "前台", "reception desk", "front desk"),
        v("water fountain", "饮水机", "water fountain", "drinking fountain"),
        v("fire exit", "安全出口", "fire exit", "emergency exit"),
        v("vending machine", "自动售货机"),
        v("printer", "打印机"),
        v("loading bay", "装卸区", "loading bay", "loading dock"),
    ),
    "adjustable": (
        v("desk", "升降桌", "standing desk", "desk"),
        v("monitor arm", "显示器支架", "monitor arm", "screen arm"),
        v("hospital bed", "病床", "hospital bed", "patient bed"),
        v("lift table", "升降台", "lift table", "scissor table"),
    ),
    "knob": (
        v("valve", "阀门", "valve", "stopcock"),
        v("tap", "水龙头", "tap", "faucet"),
        v("oven dial", "烤箱旋钮", "oven dial", "oven knob"),
        v("jar lid", "罐子盖", "jar lid", "lid of the jar"),
        v("thermostat dial", "温控旋钮", "thermostat dial", "thermostat knob"),
    ),
    "setting": (
        v("volume", "音量", "volume", "sound"),
        v("brightness", "亮度", "brightness", "screen brightness"),
        v("fan speed", "风速", "fan speed", "airflow"),
    ),
    "device": (
        v("TV", "电视", "TV", "television"),
        v("speaker", "音箱", "speaker", "smart speaker"),
        v("projector", "投影仪"),
        v("air purifier", "空气净化器"),
    ),
    "furniture": (
        v("desk", "书桌"),
        v("dresser", "五斗柜", "dresser", "chest of drawers"),
        v("tool chest", "工具柜", "tool chest", "toolbox cabinet"),
        v("filing cabinet", "文件柜"),
        v("nightstand", "床头柜", "nightstand", "bedside table"),
    ),
    "rack": tuple(v(x, x) for x in "ABCDEF"),
    "aisle": tuple(v(str(i), str(i), str(i)) for i in range(1, 9)),
    "zone": tuple(v(x, x) for x in "ABCDEFGH"),
    "tool": (
        v("screwdriver", "螺丝刀"),
        v("wrench", "扳手", "wrench", "spanner"),
        v("pliers", "钳子"),
        v("hammer", "锤子"),
        v("tape measure", "卷尺", "tape measure", "measuring tape"),
        v("soldering iron", "电烙铁"),
    ),
    "person": (
        v("technician", "技术员", "technician", "tech"),
        v("nurse", "护士"),
        v("chef", "厨师", "chef", "cook"),
        v("mechanic", "修理工"),
        v("electrician", "电工"),
        v("carpenter", "木匠"),
    ),
    "load": (
        v("pallet", "货板", "pallet", "skid"),
        v("crate", "板条箱", "crate", "wooden crate"),
        v("drum", "油桶", "drum", "barrel"),
        v("roll cage", "笼车", "roll cage", "cage trolley"),
    ),
    "item": (
        v("chair", "椅子"),
        v("towel", "毛巾"),
        v("pillow", "枕头", "pillow", "cushion"),
        v("blanket", "毯子"),
        v("water bottle", "瓶水", "water bottle", "bottle of water"),
        v("notebook", "笔记本", "notebook", "notepad"),
    ),
    # Pairs and rows whose members are one another's hard negatives.
    "lr": (v("left", "左", "left", "to the left"), v("right", "右", "right", "to the right")),
    "onoff": (
        v("on", "打开", "turn on", "power up", "switch on"),
        v("off", "关掉", "turn off", "power down", "shut off"),
    ),
    "openclose": (v("Open", "打开", "open", "pull open"), v("Close", "关上", "shut", "close")),
    "updown": (v("Raise", "升高", "raise", "lift up"), v("Lower", "降低", "lower", "bring down")),
    "turn": (
        v("clockwise", "顺时针", "clockwise", "to the right, clockwise"),
        v("counter-clockwise", "逆时针", "anticlockwise", "counterclockwise"),
    ),
    "incdec": (v("Increase", "调高", "turn up", "boost"), v("Decrease", "调低", "turn down", "reduce")),
    "pos3": (
        v("top", "最上面", "top", "uppermost", "highest"),
        v("middle", "中间", "middle", "centre"),
        v("bottom", "最下面", "bottom", "lowest"),
    ),
    "ordinal": (
        v("first", "第一", "first", "1st", "number 1"),
        v("second", "第二", "second", "2nd", "number 2"),
        v("third", "第三", "third", "3rd", "number 3"),
        v("fourth", "第四", "fourth", "4th", "number 4"),
    ),
    "n": (
        v("one", "一个", "one", "a single", "1"),
        v("two", "两个", "two", "a pair of", "2"),
        v("three", "三个", "three", "3"),
        v("four", "四个", "four", "4"),
        v("five", "五个", "five", "5"),
    ),
}


@dataclass(frozen=True)
class Template:
    """How one kind of task is written: a document (title, pattern, tags, steps; English and
    Chinese) and the queries that ask for it (English and Chinese). `{slot}` is the document's
    word; in a query it is one of the words a query may use, and `{slot.zh}` is Chinese."""

    key: str
    domain: str
    slots: tuple[str, ...]
    title: str
    title_zh: str
    pattern: str
    tags: tuple[str, ...]
    steps: tuple[str, ...]
    asks: tuple[str, ...]
    asks_zh: tuple[str, ...]


TEMPLATES: dict[str, Template] = {
    t.key: t
    for t in (
        Template(
            "pick",
            "tabletop",
            ("colour", "obj", "surface", "room"),
            "Pick up the {colour} {obj} from the {surface} in the {room}",
            "从{room.zh}的{surface.zh}上拿起{colour.zh}的{obj.zh}",
            "pick up {colour} {obj} {surface}",
            ("pick", "{obj}", "{colour}", "{room}"),
            ("navigate_to({room} {surface})", "find_object({colour} {obj})", "grasp from above", "lift 10 cm"),
            (
                "grab the {colour} {obj} on the {surface} in the {room}",
                "in the {room}, take the {colour} {obj} off the {surface}",
                "could you lift the {colour} {obj} sitting on the {room} {surface}",
            ),
            (
                "拿起{room.zh}{surface.zh}上那个{colour.zh}的{obj.zh}",
                "去{room.zh}把{surface.zh}上的{colour.zh}{obj.zh}拿起来",
            ),
        ),
        Template(
            "put",
            "tabletop",
            ("colour", "obj", "container"),
            "Put the {colour} {obj} into the {container}",
            "把{colour.zh}的{obj.zh}放进{container.zh}",
            "put {colour} {obj} in {container}",
            ("place", "{obj}", "{container}"),
            ("find_object({colour} {obj})", "grasp", "find_object({container})", "release above the opening"),
            ("drop the {colour} {obj} in the {container}", "stow the {colour} {obj} inside the {container}"),
            ("把{colour.zh}{obj.zh}放到{container.zh}里", "{colour.zh}的{obj.zh}要放进{container.zh}"),
        ),
        Template(
            "nav-turn",
            "navigation",
            ("lr", "landmark", "room"),
            "Turn {lr} at the {landmark} and stop in the {room}",
            "在{landmark.zh}处向{lr.zh}转，停在{room.zh}",
            "turn {lr} at {landmark}",
            ("navigation", "turn", "{room}"),
            ("navigate_to({landmark})", "rotate 90 degrees {lr}", "navigate_to({room})", "stop"),
            (
                "at the {landmark} go {lr}, then wait in the {room}",
                "head {lr} once you reach the {landmark}; end in the {room}",
            ),
            ("走到{landmark.zh}后往{lr.zh}拐，然后停在{room.zh}",),
        ),
        Template(
            "switch",
            "appliance",
            ("onoff", "appliance", "room"),
            "Switch {onoff} the {appliance} in the {room}",
            "{onoff.zh}{room.zh}的{appliance.zh}",
            "switch {onoff} {appliance} {room}",
            ("appliance", "{appliance}", "{room}"),
            ("navigate_to({room})", "find_object({appliance} switch)", "press switch {onoff}", "confirm state {onoff}"),
            ("please {onoff} the {appliance} in the {room}", "{onoff} the {room} {appliance}"),
            ("请{onoff.zh}{room.zh}里的{appliance.zh}", "把{room.zh}的{appliance.zh}{onoff.zh}"),
        ),
        Template(
            "openclose",
            "household",
            ("openclose", "openable", "room"),
            "{openclose} the {openable} in the {room}",
            "{openclose.zh}{room.zh}的{openable.zh}",
            "{openclose} {openable} {room}",
            ("household", "{openable}", "{room}"),
            ("navigate_to({room} {openable})", "find handle", "{openclose} fully", "check it stays"),
            ("{openclose} the {openable} in the {room} for me", "can you {openclose} the {room} {openable}"),
            ("帮我把{room.zh}的{openable.zh}{openclose.zh}",),
        ),
        Template(
            "updown",
            "household",
            ("updown", "adjustable", "room"),
            "{updown} the {adjustable} in the {room}",
            "把{room.zh}的{adjustable.zh}{updown.zh}",
            "{updown} {adjustable} {room}",
            ("adjust", "{adjustable}", "{room}"),
            ("navigate_to({room})", "find_object({adjustable} control)", "hold {updown} button 3 s"),
            ("{updown} the {adjustable} in the {room} a bit", "in the {room}, {updown} the {adjustable}"),
            ("请把{room.zh}里的{adjustable.zh}{updown.zh}一点",),
        ),
        Template(
            "rotate",
            "lab",
            ("turn", "knob", "room"),
            "Rotate the {knob} in the {room} {turn}",
            "把{room.zh}的{knob.zh}{turn.zh}拧",
            "rotate {knob} {turn}",
            ("rotate", "{knob}", "{room}"),
            ("navigate_to({room} {knob})", "grasp {knob}", "twist {turn} a half turn", "release"),
            ("twist the {knob} in the {room} {turn}", "in the {room} give the {knob} a half turn {turn}"),
            ("去{room.zh}把{knob.zh}往{turn.zh}方向转", "{turn.zh}转动{room.zh}的{knob.zh}"),
        ),
        Template(
            "adjust",
            "appliance",
            ("incdec", "setting", "device", "room"),
            "{incdec} the {setting} of the {device} in the {room}",
            "{incdec.zh}{room.zh}{device.zh}的{setting.zh}",
            "{incdec} {setting} {device}",
            ("appliance", "{device}", "{setting}"),
            ("navigate_to({room} {device})", "open {setting} control", "{incdec} by two steps"),
            (
                "{incdec} the {setting} on the {room} {device}",
                "could you {incdec} the {device}'s {setting} in the {room}",
            ),
            ("把{room.zh}{device.zh}的{setting.zh}{incdec.zh}一点",),
        ),
        Template(
            "drawer",
            "household",
            ("pos3", "furniture", "room"),
            "Open the {pos3} drawer of the {furniture} in the {room}",
            "打开{room.zh}{furniture.zh}{pos3.zh}的抽屉",
            "open {pos3} drawer {furniture}",
            ("drawer", "{furniture}", "{room}"),
            ("navigate_to({room} {furniture})", "find_object({pos3} drawer handle)", "pull 20 cm"),
            (
                "pull out the {pos3} drawer of the {furniture} in the {room}",
                "in the {room}, slide open the {furniture}'s {pos3} drawer",
            ),
            ("拉开{room.zh}里{furniture.zh}{pos3.zh}那个抽屉",),
        ),
        Template(
            "shelf",
            "warehouse",
            ("ordinal", "rack", "aisle"),
            "Take the box from the {ordinal} shelf of rack {rack} in aisle {aisle}",
            "从{aisle.zh}号通道{rack.zh}货架的{ordinal.zh}层取箱子",
            "take box {ordinal} shelf rack {rack} aisle {aisle}",
            ("warehouse", "picking", "aisle-{aisle}"),
            ("navigate_to(aisle {aisle}, rack {rack})", "scan shelf level {ordinal}", "pull box onto the fork"),
            (
                "grab the carton on the {ordinal} shelf of rack {rack}, aisle {aisle}",
                "aisle {aisle}, rack {rack}: fetch the box sitting on the {ordinal} level",
            ),
            ("去{aisle.zh}号通道，从{rack.zh}号货架{ordinal.zh}层拿箱子",),
        ),
        Template(
            "stack",
            "tabletop",
            ("n", "colour", "surface"),
            "Stack {n} {colour} cubes on the {surface}",
            "在{surface.zh}上叠放{n.zh}{colour.zh}方块",
            "stack {n} {colour} cubes {surface}",
            ("stack", "cube", "{colour}"),
            ("find_object({colour} cube) x {n}", "place each on the {surface}", "check the tower is straight"),
            ("build a tower of {n} {colour} blocks on the {surface}", "pile {n} {colour} cubes up on the {surface}"),
            ("在{surface.zh}上摞{n.zh}{colour.zh}的方块", "用{n.zh}{colour.zh}方块在{surface.zh}上搭塔"),
        ),
        Template(
            "bring",
            "household",
            ("n", "item", "room"),
            "Bring {n} {item}s to the {room}",
            "拿{n.zh}{item.zh}到{room.zh}",
            "bring {n} {item} {room}",
            ("delivery", "{item}", "{room}"),
            ("navigate_to(storage)", "collect {n} x {item}", "navigate_to({room})", "set them down"),
            ("carry {n} {item}s over to the {room}", "the {room} needs {n} {item}s, fetch them"),
            ("送{n.zh}{item.zh}去{room.zh}", "{room.zh}需要{n.zh}{item.zh}，拿过去"),
        ),
        Template(
            "handover",
            "lab",
            ("tool", "person"),
            "Hand the {tool} to the {person}",
            "把{tool.zh}递给{person.zh}",
            "hand {tool} to {person}",
            ("tool", "handover", "{person}"),
            ("find_object({tool})", "grasp by the handle", "navigate_to({person})", "offer handle first"),
            ("pass the {person} a {tool}", "the {person} needs the {tool}, give it over"),
            ("给{person.zh}拿{tool.zh}", "{person.zh}要{tool.zh}，递过去"),
        ),
        Template(
            "move-load",
            "warehouse",
            ("load", "zone"),
            "Move the {load} to staging zone {zone}",
            "把{load.zh}移到{zone.zh}区",
            "move {load} zone {zone}",
            ("warehouse", "{load}", "zone-{zone}"),
            ("locate({load})", "lift with forks", "navigate_to(zone {zone})", "set down and log"),
            ("take the {load} over to zone {zone}", "shift that {load} into staging area {zone}"),
            ("把{load.zh}运到{zone.zh}区",),
        ),
    )
}

#: The 40 core documents: (family, template, slot values, language). Each family's documents
#: are each other's hard negatives: they differ only in the slot the family is named after.
CORE: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("colour", "pick", ("red", "cube", "table", "kitchen"), "en"),
    ("colour", "pick", ("blue", "cube", "table", "kitchen"), "en"),
    ("colour", "pick", ("green", "cube", "table", "kitchen"), "en"),
    ("colour", "pick", ("red", "ball", "tray", "lab"), "zh"),
    ("colour", "pick", ("yellow", "ball", "tray", "lab"), "zh"),
    ("direction", "nav-turn", ("left", "elevator", "office"), "en"),
    ("direction", "nav-turn", ("right", "elevator", "office"), "en"),
    ("direction", "switch", ("on", "lights", "living room"), "zh"),
    ("direction", "switch", ("off", "lights", "living room"), "zh"),
    ("direction", "openclose", ("Open", "fridge", "kitchen"), "en"),
    ("direction", "openclose", ("Close", "fridge", "kitchen"), "en"),
    ("direction", "updown", ("Raise", "hospital bed", "bedroom"), "en"),
    ("direction", "updown", ("Lower", "hospital bed", "bedroom"), "en"),
    ("direction", "rotate", ("clockwise", "valve", "lab"), "en"),
    ("direction", "rotate", ("counter-clockwise", "valve", "lab"), "en"),
    ("direction", "adjust", ("Increase", "volume", "TV", "living room"), "en"),
    ("direction", "adjust", ("Decrease", "volume", "TV", "living room"), "en"),
    ("position", "drawer", ("top", "dresser", "bedroom"), "en"),
    ("position", "drawer", ("middle", "dresser", "bedroom"), "en"),
    ("position", "drawer", ("bottom", "dresser", "bedroom"), "en"),
    ("position", "shelf", ("first", "B", "3"), "en"),
    ("position", "shelf", ("second", "B", "3"), "en"),
    ("position", "shelf", ("third", "B", "3"), "en"),
    ("count", "stack", ("one", "red", "tray"), "en"),
    ("count", "stack", ("two", "red", "tray"), "en"),
    ("count", "stack", ("three", "red", "tray"), "en"),
    ("count", "bring", ("two", "chair", "office"), "zh"),
    ("count", "bring", ("four", "chair", "office"), "zh"),
    ("object", "put", ("green", "ball", "box"), "en"),
    ("object", "put", ("green", "cube", "box"), "en"),
    ("object", "put", ("white", "cup", "basket"), "en"),
    ("object", "put", ("white", "bowl", "basket"), "en"),
    ("object", "handover", ("screwdriver", "technician"), "zh"),
    ("object", "handover", ("wrench", "technician"), "zh"),
)

#: Documents found only through meaning: no query repeats its document's key words. Pairs from
#: one setting (breakfast, pets and plants, a meeting room) are each other's near neighbours.
PARAPHRASE: tuple[dict[str, Any], ...] = (
    {
        "id": "toast-bread",
        "title": "Put two slices of bread in the toaster and press the lever",
        "pattern": "toaster bread slices",
        "tags": ["kitchen", "breakfast", "toaster"],
        "steps": ["navigate_to(kitchen counter)", "find_object(bread bag)", "insert two slices", "press lever down"],
        "asks": ["make me something crunchy and warm to start the day", "I fancy toast this morning"],
        "asks_zh": ["早餐我想吃烤面包片", "帮我烤两片吐司"],
    },
    {
        "id": "brew-tea",
        "title": "Boil water in the kettle and steep a tea bag in a mug",
        "pattern": "kettle tea bag steep",
        "tags": ["kitchen", "drink", "kettle"],
        "steps": ["fill kettle to 0.5 l", "switch kettle on", "drop tea bag in mug", "pour once boiled, wait 3 min"],
        "asks": ["I could use a hot cuppa", "fix me a cup of English breakfast"],
        "asks_zh": ["给我泡杯茶"],
    },
    {
        "id": "water-ferns",
        "title": "Fill the watering can and pour it over the potted ferns",
        "pattern": "watering can potted ferns",
        "tags": ["plants", "garden", "watering"],
        "steps": ["fill watering can at the sink", "navigate_to(window sill)", "pour slowly at the soil"],
        "asks": ["the houseplants look thirsty", "give the greenery by the window a drink"],
        "asks_zh": ["给盆栽浇浇水"],
    },
    {
        "id": "feed-fish",
        "title": "Drop a pinch of flakes into the aquarium",
        "pattern": "aquarium fish flakes",
        "tags": ["pets", "aquarium"],
        "steps": ["find_object(flake food tin)", "open lid", "shake a pinch over the tank", "close lid"],
        "asks": ["the goldfish are hungry", "it's dinner time for the tank's swimmers"],
        "asks_zh": ["该喂金鱼了"],
    },
    {
        "id": "wipe-whiteboard",
        "title": "Wipe the whiteboard with the felt eraser until no marker remains",
        "pattern": "wipe whiteboard eraser marker",
        "tags": ["meeting-room", "cleaning", "whiteboard"],
        "steps": ["navigate_to(meeting room)", "find_object(felt eraser)", "wipe top to bottom", "check for streaks"],
        "asks": ["get rid of the scribbles left after our discussion", "clear yesterday's diagrams so we can draw"],
        "asks_zh": ["把会议室白板上的字擦干净"],
    },
    {
        "id": "projector-screen",
        "title": "Lower the projection screen and power the projector",
        "pattern": "projection screen projector",
        "tags": ["meeting-room", "presentation"],
        "steps": ["navigate_to(meeting room)", "pull screen down", "press projector power", "wait for image"],
        "asks": ["set things up so I can show my slides", "we are about to present, get the display ready"],
        "asks_zh": ["准备好放幻灯片"],
    },
)


@dataclass(frozen=True)
class Doc:
    id: str
    title: str
    pattern: str
    tags: tuple[str, ...]
    steps: tuple[str, ...]
    lang: str
    family: str
    template: str = ""  # "" for a paraphrase document
    values: tuple[str, ...] = ()  # the document's word for each of the template's slots


@dataclass(frozen=True)
class Query:
    text: str
    expect: str
    lang: str
    family: str


def _value(slot: str, en: str) -> Value:
    for val in VOCAB[slot]:
        if val.en == en:
            return val
    raise KeyError(f"{slot}={en!r} is not in the vocabulary")


def _fill(text: str, t: Template, vals: Sequence[Value], rng: random.Random | None) -> str:
    """`text` with every `{slot}` (the document's word, or a query's when `rng` picks one of
    the words a query may use) and `{slot.zh}` filled in."""
    out = text
    for slot, val in zip(t.slots, vals, strict=True):
        out = out.replace("{" + slot + ".zh}", val.zh)
        said = val.en if rng is None else rng.choice(val.said)
        out = out.replace("{" + slot + "}", said)
    return out


def _doc_id(t: Template, vals: Sequence[Value], lang: str) -> str:
    words = "-".join(val.en.lower().replace(" ", "-") for val in vals)
    return f"{t.key}-{words}" + ("-zh" if lang == "zh" else "")


def _doc(t: Template, vals: Sequence[Value], lang: str, family: str) -> Doc:
    title = _fill(t.title_zh if lang == "zh" else t.title, t, vals, None)
    title = title[0].upper() + title[1:]
    steps = tuple(_fill(s, t, vals, None) for s in t.steps)
    if lang == "zh":
        steps = tuple(_fill(s.replace("}", ".zh}"), t, vals, None) for s in t.steps)
    tags = tuple(_fill(x, t, vals, None).replace(" ", "-") for x in t.tags)
    pattern = _fill(t.pattern, t, vals, None) if lang == "en" else title
    words = tuple(val.en for val in vals)
    return Doc(_doc_id(t, vals, lang), title, pattern, tags, steps, lang, family, t.key, words)


def core() -> tuple[list[Doc], list[Query]]:
    """The 40 core documents and their queries (each English and Chinese)."""
    rng = random.Random(SEED)
    docs: list[Doc] = []
    queries: list[Query] = []
    for family, key, words, lang in CORE:
        t = TEMPLATES[key]
        vals = [_value(s, w) for s, w in zip(t.slots, words, strict=True)]
        d = _doc(t, vals, lang, family)
        docs.append(d)
        for ask in t.asks:
            queries.append(Query(_fill(ask, t, vals, rng), d.id, "en", family))
        for ask in t.asks_zh:
            queries.append(Query(_fill(ask, t, vals, rng), d.id, "zh", family))
    for p in PARAPHRASE:
        docs.append(Doc(p["id"], p["title"], p["pattern"], tuple(p["tags"]), tuple(p["steps"]), "en", "paraphrase"))
        queries += [Query(q, p["id"], "en", "paraphrase") for q in p["asks"]]
        queries += [Query(q, p["id"], "zh", "paraphrase") for q in p["asks_zh"]]
    return docs, queries


def _tuples(t: Template) -> Iterator[tuple[Value, ...]]:
    return product(*(VOCAB[s] for s in t.slots))


def corpus(size: int, seed: int = SEED) -> tuple[list[Doc], list[Query]]:
    """The core documents and `size` - 40 distractors (none equal to a core tuple; a tenth of
    them in Chinese), with the core queries. Deterministic for (size, seed)."""
    docs, queries = core()
    if size < len(docs):
        raise ValueError(f"the smallest corpus has {len(docs)} documents")
    rng = random.Random(seed)
    taken = {d.id.removesuffix("-zh") for d in docs}
    pools: dict[str, list[tuple[Value, ...]]] = {}
    for key, t in TEMPLATES.items():
        pool = [vals for vals in _tuples(t) if _doc_id(t, vals, "en") not in taken]
        rng.shuffle(pool)
        pools[key] = pool
    while len(docs) < size:
        open_ = [k for k, p in pools.items() if p]
        if not open_:
            raise ValueError(f"the templates hold fewer than {size} documents")
        key = rng.choice(open_)
        vals = pools[key].pop()
        lang = "zh" if rng.random() < 0.1 else "en"
        docs.append(_doc(TEMPLATES[key], vals, lang, "distractor"))
    return docs, queries


def capacity() -> int:
    """How many documents the templates can make (core included)."""
    return sum(1 for t in TEMPLATES.values() for _ in _tuples(t)) + len(PARAPHRASE)


def as_yaml(docs: Sequence[Doc], queries: Sequence[Query]) -> str:
    import yaml

    data = {
        "docs": [
            {
                "id": d.id,
                "title": d.title,
                "pattern": d.pattern,
                "tags": list(d.tags),
                "steps": list(d.steps),
                "lang": d.lang,
                "family": d.family,
            }
            for d in docs
        ],
        "queries": [{"q": q.text, "expect": q.expect, "lang": q.lang, "family": q.family} for q in queries],
    }
    return str(yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=200))


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--size", type=int, default=40)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--out", help="write the YAML here instead of standard output")
    args = p.parse_args(argv)
    text = as_yaml(*corpus(args.size, args.seed))
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)  # noqa: T201  # the command's output


if __name__ == "__main__":
    main()
