"""A synthetic but robot-shaped experience corpus, fully determined by a seed.

Memories look like what robots and training loops record: a dozen task families (grasping,
placing, doors, navigation, pouring, inserting, inspection, docking …) over objects, colours and
places, with parameters (grip force, approach angle, speed), a position, the robot, and the task
outcome and source (real or simulation) in the context; sentences vary in form (plain
observation, cause, constraint, gotcha, failure report). Shared by bench/bench_experiences.py and
the 10,000-memory recall tests.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

OBJECTS = (
    "mug", "cup", "bottle", "bowl", "plate", "can", "box", "book", "phone", "tablet", "screwdriver", "wrench",
    "sponge", "towel", "apple", "banana", "jar", "lid", "remote", "marker", "tape roll", "cable", "glass",
    "tray", "kettle", "pan", "spatula", "key", "wallet", "badge",
)  # fmt: skip
COLOURS = ("red", "blue", "green", "yellow", "black", "white", "orange", "purple", "grey", "silver")
PLACES = (
    "kitchen", "lab 3", "lab 7", "mailroom", "reception", "warehouse bay 2", "loading dock", "office 214",
    "break room", "workshop", "storage room", "clean room", "cafeteria", "lobby", "corridor B", "server room",
    "pharmacy", "library", "garage", "roof terrace",
)  # fmt: skip
SURFACES = ("table", "shelf", "counter", "tray", "cart", "desk", "conveyor", "rack")
DOORS = ("fire door", "glass door", "sliding door", "badge door", "double door", "cabinet door", "fridge door")
ROBOTS = (("ur5-01", "ur5e"), ("ur5-02", "ur5e"), ("franka-01", "panda"), ("tiago-07", "tiago"), ("spot-02", "spot"))
GRASPS = ("handle", "rim", "body", "side", "top", "base")
FAILURES = (
    "slipped out of the gripper", "was dropped", "collided with the shelf", "tipped over", "was crushed",
    "was missed by 2 cm", "got stuck", "spilled",
)  # fmt: skip
CAUSES = (
    "the surface was wet", "the lighting caused glare", "the object was heavier than expected",
    "the pose estimate drifted", "the gripper pads were worn", "a person walked past", "the camera was occluded",
)  # fmt: skip


@dataclass(frozen=True)
class Item:
    insight: str
    context: dict[str, Any]
    collection: str = "default"


def _task(rng: random.Random) -> tuple[str, str, str]:
    """(task name, the phrase used in sentences, the main object)."""
    obj = rng.choice(OBJECTS)
    colour = rng.choice(COLOURS)
    family = rng.randrange(10)
    if family < 3:
        return "grasp", f"grasp the {colour} {obj} by the {rng.choice(GRASPS)}", obj
    if family == 3:
        return "place", f"place the {colour} {obj} on the {rng.choice(SURFACES)}", obj
    if family == 4:
        return "open_door", f"open the {rng.choice(DOORS)} in the {rng.choice(PLACES)}", "door"
    if family == 5:
        return "navigate", f"navigate to the {rng.choice(PLACES)}", "route"
    if family == 6:
        return "pour", f"pour water from the {obj} into the {rng.choice(('glass', 'bowl', 'kettle', 'jar'))}", obj
    if family == 7:
        return "insert", f"insert the {colour} {obj} into the {rng.choice(SURFACES)} slot", obj
    if family == 8:
        return "handover", f"hand the {colour} {obj} to a person in the {rng.choice(PLACES)}", obj
    return "dock", f"dock at the charger in the {rng.choice(PLACES)}", "charger"


def item(rng: random.Random) -> Item:
    name, phrase, _obj = _task(rng)
    force = round(rng.uniform(2.0, 40.0), 1)
    angle = rng.randrange(0, 91, 5)
    speed = round(rng.uniform(0.05, 1.0), 2)
    success = rng.random() < 0.7
    robot_id, robot_type = rng.choice(ROBOTS)
    form = rng.randrange(6)
    if form == 0:
        text = f"{phrase} with a grip force of {force} N at {angle} degrees"
    elif form == 1:
        text = f"To {phrase}, approach at {speed} m/s and {angle} degrees; it {'worked' if success else 'failed'}"
    elif form == 2:
        text = f"When trying to {phrase} the object {rng.choice(FAILURES)} because {rng.choice(CAUSES)}"
        success = False
    elif form == 3:
        text = f"Do not {phrase} faster than {speed} m/s: above that the grip force of {force} N is not enough"
    elif form == 4:
        text = f"Watch out: to {phrase} reduce speed to {speed} m/s when {rng.choice(CAUSES)}"
    else:
        text = f"{phrase}: grip force {force} N, approach angle {angle} deg, speed {speed} m/s"
    z = rng.uniform(0, 1.5)
    context: dict[str, Any] = {
        "params": {"grip_force": force, "approach_angle": angle, "speed": speed},
        "spatial": {"position": [round(rng.uniform(-2, 2), 3), round(rng.uniform(-2, 2), 3), round(z, 3)]},
        "robot": {"id": robot_id, "type": robot_type},
        "task": {"name": name, "success": success, "source": "real" if rng.random() < 0.3 else "sim"},
    }
    return Item(text, context, "default" if rng.random() < 0.9 else "kitchen-lab")


def corpus(n: int, seed: int = 20261129) -> Iterator[Item]:
    rng = random.Random(seed)
    for _ in range(n):
        yield item(rng)


#: Natural recall queries, as a planner would phrase them.
QUERIES = (
    "grasp the red mug",
    "how to grasp a bottle by the handle",
    "why did the cup slip out of the gripper",
    "open the fire door in the kitchen",
    "navigate to the mailroom",
    "pour water into the glass",
    "place the box on the shelf",
    "insert the key into the rack slot",
    "dock at the charger",
    "hand the tablet to a person",
    "grip force for the wrench",
    "wet surface slipped",
    "glare from the lighting",
    "approach angle for the jar",
    "the pose estimate drifted",
    "grasp the blue kettle by the handle",
    "collided with the shelf",
    "speed limit when a person walked past",
    "sliding door in lab 7",
    "worn gripper pads",
)
