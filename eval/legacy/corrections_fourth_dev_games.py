"""In-game callouts for the dev split of the fourth corrected-facts set.

Same shape as eval/legacy/corrections_fourth_games.GAMES, written fresh for
eval/recipes/corrections_fourth.py --split dev (four games here, four in
corrections_fourth_dev_games2): `lines` are callouts with {slot} placeholders filled from `slots`
({n} is another speaker's name), `cheer` the game's own short reactions.
"""

from __future__ import annotations


def lines_of(block: str) -> list[str]:
    """One entry per non-blank line of block."""
    return [line.strip() for line in block.strip().splitlines() if line.strip()]


def choices(text: str) -> list[str]:
    """The "|"-separated choices of a slot."""
    return [part.strip() for part in text.split("|")]


GAMES: dict[str, dict[str, object]] = {
    "kart": {
        "slots": {
            "item": choices("shell | red shell | blue shell | banana | mushroom | star | bomb | lightning | coin"),
            "spot": choices("the jump | the shortcut | the last lap | the hairpin | the bridge | the tunnel"),
        },
        "lines": lines_of("""
blue shell incoming, sorry whoever's first
who threw that {item}
i've got a {item}, holding it
{n} you're right behind me, back off
take {spot} wide
i missed {spot} again
drift drift drift
mini turbo, nice
i'm in twelfth, this is humiliating
ok i'm up to fourth
{item} on {spot}, watch out
i fell off {spot} lmao
who put a {item} there
{n} did you just hit me
three laps, why is this so long
first place is so lonely
i'm saving the {item} for {spot}
that's my line, get off my line
i got hit by lightning right before {spot}
ok last lap, last lap
rainbow road is cursed
i keep bouncing off the walls
{n} you got me with the {item} again
the ai is cheating, i swear
picking the tiny car this time
heavy cars are broken
that shortcut doesn't work anymore, they patched it
i'm using {spot} every lap now
wait which way is {spot}
{n} take the inside
i got boxed in
someone's coming up fast
i'm just cruising in the middle
sabotage, this is sabotage
i got a {item} at the last box
go go go
i'm spinning, i'm spinning
"""),
        "cheer": lines_of("""
yesss first
photo finish
get blue shelled
what a line
smooth
ok racer
podium baby
get out of my way
clean lap
"""),
    },
    "royale": {
        "slots": {
            "drop": choices(
                "the docks | the factory | the mall | the quarry | the dam | the farmhouse | the power plant"
            ),
            "dir": choices("north | south | east | west | behind us | on the ridge | in the building"),
        },
        "lines": lines_of("""
we dropping {drop}?
i'm landing {drop}, follow me
squad {dir}, careful
there's a team {dir}
i'm knocked, i'm knocked
pick me up {n}
i need shields
anyone got ammo for this thing
zone's closing, we gotta move
rotate to {drop}
the circle's on us
i'm looting {drop}
third party {dir}
they're pushing, hold the door
cracked him, he's one shot
{n} revive me please
i'm out of heals
i've got a sniper, i'll cover
ping where they are
pinging {dir}
car, get in the car
i'm driving, hold on
don't jump off, don't
top ten, play it safe
last squad {dir}
they're camping {drop}
i'm getting beamed from {dir}
grab the loot and go
{n} you've got the good gun
drop me some meds
storm's doing so much damage
we're the last ones in the building
wait wait wait, footsteps
two left, one knocked
they're in the bushes {dir}
i hate the bushes
full squad {dir}
"""),
        "cheer": lines_of("""
squad wipe
victory royale baby
let's gooo
insane
he got cleaned up
what a shot
we're winning this
dub incoming
ez
"""),
    },
    "moba": {
        "slots": {
            "lane": choices("top | mid lane | bot | jungle | river | base | dragon pit | baron"),
            "k": choices("two | three | four | all five"),
        },
        "lines": lines_of("""
missing {lane}
{k} {lane}, watch out
gank {lane} now
i'm coming {lane}
i need a ward {lane}
my lane's lost, sorry
{n} you're feeding
don't dive tower
tower dive, tower dive
ult's up
my ult's on cooldown
back, back, back off
flash is down
i'm backing to buy
{k} of them {lane}
group {lane}
take the objective
{n} ping your summoners
their jungler's {lane}
farming, leave me alone
we're behind on gold
just scale, we scale better
push {lane}, they're all dead
i'm split pushing
{n} stop chasing
report the jungler, i'm joking
invade their jungle?
they took our buff
wave's crashing {lane}
kill him, he's got no flash
i'm stuck in their base
the minions are so annoying
we need to end this
i'm one item off
this comp is so bad
they're grouping {lane}
"""),
        "cheer": lines_of("""
ace
double kill
shutdown, nice
outplayed
insane ult
penta watch
gg ez
we're so back
clean
"""),
    },
    "heist": {
        "slots": {
            "room": choices("the vault | the lobby | the server room | the roof | the loading bay | the back office"),
            "gear": choices("drill | keycard | thermite | saw | the bag | the ecm"),
        },
        "lines": lines_of("""
who's got the {gear}
i'm taking the {gear} to {room}
guard in {room}
cameras on {room}
i'm on cameras
cuff that guy {n}
civilians in {room}, tie them down
the {gear} jammed again
fix the {gear}, fix it
alarm's going off
we're loud now, we're loud
stay stealth, stay stealth
{n} bag it up
bags on the roof
the van's here, go go
cops from {room}
shields coming in
i'm down in {room}
{n} pick me up
two bags left
where's the {gear}
the keycard's in {room} i think
pager, answer the pager
i answered the pager
{n} don't shoot the civvies
take the stairs
we've got like four minutes
snipers on the roof
dozer, there's a dozer
i need ammo, drop a bag
kill the camera guy
the door's open, the door's open
sneak past the guard
{gear} done
i'm carrying the heavy bag, i'm so slow
"""),
        "cheer": lines_of("""
clean heist
we got out
stealth legends
escape complete
big payday
nobody saw a thing
pros only
we're rich
easy money
"""),
    },
}
