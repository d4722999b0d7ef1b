"""More in-game callouts for the dev split of the fourth corrected-facts set.

Same shape as eval/legacy/corrections_fourth_dev_games.GAMES: `slots`, `lines` with {slot} placeholders
({n} is another speaker's name) and `cheer`, one callout a line.
"""

from __future__ import annotations

from eval.legacy.corrections_fourth_dev_games import choices, lines_of

GAMES: dict[str, dict[str, object]] = {
    "kitchen": {
        "slots": {
            "food": choices("tomato | onion | lettuce | fish | rice | mushroom | the meat | the dough"),
            "place": choices("the pass | the sink | the hob | the chopping board | the bin | the conveyor"),
        },
        "lines": lines_of("""
chop the {food}
who's on {place}
i'm on {place}, don't touch it
{n} the pan's on fire
fire fire fire
where's the extinguisher
plates, we need plates
wash some plates {n}
throw me the {food}
i'm throwing the {food}
it went in the water lol
serve it serve it
the order's about to expire
that one's burnt, bin it
{n} stop standing on {place}
the floor's moving again
why is the kitchen on a truck
we're so behind on orders
i've got two {food} on {place}
someone grab the {food}
ok who put the {food} in the bin
{n} you're in my way
swap, swap sides
the rats stole the {food}
three stars, we need three stars
the ice is so slippery
hold on, i'm cooking
don't dash into me
it's ready, it's ready
plating now
tickets piling up
we need more {food}
{n} dash to {place}
"""),
        "cheer": lines_of("""
three stars!
order up
we're chefs
kitchen nightmares who
fed the whole city
clean service
nice plating
the team
michelin
"""),
    },
    "survival": {
        "slots": {
            "res": choices("wood | stone | fibre | metal | flint | hide | crystal"),
            "place": choices("the beach | the cave | the cliffs | the swamp | the ridge | the base"),
        },
        "lines": lines_of("""
i need more {res}
going to get {res} at {place}
there's a raptor at {place}
{n} it's chasing me
build walls first, then roof
who's got the spare axe
i'm starving, is there meat
cook the meat, don't eat it raw
my character's freezing
night's coming, get back to base
i'm tamed one, i'm tamed one
the tame died, nooo
{n} feed the dinos
don't leave the gate open
something's knocking on the walls
i dropped all my {res} at {place}
where's my body, i died at {place}
we need a forge
craft me a spear {n}
the storage is full
someone sort the boxes
i'm building a boat
the tide's coming in
careful, there's a shark
my torch went out
it's pitch dark at {place}
i've got fifty {res}
put it in the chest
who took all the {res}
i'm going afk in the base
{n} stop punching trees at night
"""),
        "cheer": lines_of("""
we survived the night
base looking good
tamed!
new tool unlocked
we're thriving
ok that's clean
home sweet home
dino gang
safe
"""),
    },
    "rts": {
        "slots": {
            "unit": choices("archers | knights | workers | cavalry | siege | spearmen | scouts | the mages"),
            "dir": choices("left side | right side | the ramp | their natural | my main | the middle"),
        },
        "lines": lines_of("""
they're attacking {dir}
send {unit} {dir}
i need help {dir}
{n} where's your army
more {unit}, we need more {unit}
i'm making {unit}
they've got so many {unit}
scout {dir}
i'm floating resources
spend your money {n}
supply blocked again
i'm teching up
rush them now
defend {dir}
my {unit} got wiped
retreat, retreat
build a wall {dir}
they're expanding
{n} take their expansion
i've got no workers left
upgrade armour
i forgot to make {unit}
push with me {dir}
they're sneaking {unit} round {dir}
my base is on fire
hold the line {dir}
their {unit} are wrecking me
i'm maxed out
we attack together, on three
focus the {unit}
ok gg they're all gone
"""),
        "cheer": lines_of("""
huge fight
we held
perfect micro
they're crumbling
victory
gg well played
what a push
clean defence
macro god
"""),
    },
    "ghosts": {
        "slots": {
            "room": choices(
                "the kitchen | the basement | the attic | the nursery | the hallway | the garage | the bathroom"
            ),
            "tool": choices("emf reader | spirit box | thermometer | uv torch | camera | salt | crucifix"),
        },
        "lines": lines_of("""
it's in {room}
freezing temps in {room}
i'm getting emf five
spirit box, say something
did you hear that
it answered, it answered
{n} where are you
i'm in {room}, come here
hunt, it's hunting
hide hide hide
the door just slammed
who's got the {tool}
put the {tool} down in {room}
the lights are flickering
my sanity's so low
i'm not going in {room}
fingerprints on the door
ghost writing in the book
{n} don't say its name
i said its name, sorry
it's a demon, it's gotta be
nah it's a shade
the footsteps are coming closer
i'm in the closet
{n} is dead, rip
grab the {tool} and go
i saw it, it walked past me
the van, get back to the van
it threw a plate at me
there's something in {room}
evidence, we've got two evidence
"""),
        "cheer": lines_of("""
we got all three
nailed it
ghost identified
survived lol
professional hunters
payday
we live
fear nothing
too easy
"""),
    },
}
