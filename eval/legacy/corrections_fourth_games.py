"""In-game callouts for the fourth corrected-facts set (eval/recipes/corrections_fourth.py).

One entry per game the regulars play while they talk (four here, four in corrections_fourth_games2),
written one callout a line. `lines` are callouts with {slot} placeholders filled from `slots` ({n}
is another speaker's name), `cheer` the game's own short reactions. Written as speech-to-text renders
voice chat: lowercase, clipped, repeated.
"""

from __future__ import annotations


def lines_of(block: str) -> list[str]:
    """One entry per non-blank line of block."""
    return [line.strip() for line in block.strip().splitlines() if line.strip()]


def choices(text: str) -> list[str]:
    """The "|"-separated choices of a slot."""
    return [part.strip() for part in text.split("|")]


GAMES: dict[str, dict[str, object]] = {
    "shooter": {
        "slots": {
            "loc": choices(
                "a main | b main | mid | a site | b site | heaven | hell | short | long | garage | tree | market "
                "| window | pillar | ct | lobby | link | elbow | vents | default"
            ),
            "k": choices("one | two | three | like two | one maybe two"),
        },
        "lines": lines_of("""
he's one, he's one
watch {loc} for me
i'll go {loc} with you
nobody's {loc}, it's empty
i heard steps {loc}
he's in the corner {loc}
off angle {loc}, careful
i got one, he's {loc} now
pick up my gun {n}
i'm playing retake
they've got an op
op's {loc}, don't peek it
can someone buy me a shield
we're four v three, play together
time time, they're running out of time
{k} {loc}
{k} {loc} {k} {loc}
he's {loc}, he's {loc}
he's lit, he's so lit
one shot, one shot
i'm dead, he's {loc}
spike's down {loc}
rotate rotate rotate
save it, just save
uh he's behind, behind you
where is he where is he
they're stacking {loc}
i've got no money
{n} drop me something
wait for my flash
flashing {loc} now
i'm lurking {loc}
last one {loc}, he's low
ugh i whiffed so hard
ok eco this one
full buy full buy
i'm anchoring {loc}
who's got ult
i have ult, i have ult
one tap lmao
he's defusing he's defusing
tap it tap it tap it
clutch or kick {n}
my ping is so bad rn
bro was running and hitting
smoke {loc} please
sorry that was me
i'm literally one hp
it's a fake, rotate back
{n} what are you doing
he's peeking {loc}
don't peek don't peek
plant plant plant
i'll hold {loc}
why is he holding {loc} like that
nice trade {n}
drop the gun, drop it
i'm reloading
"""),
        "cheer": lines_of("""
nice
nice nice nice
lets gooo
ggs
what a round
that's so bad
we need this round
no no no no
ace??
he's cheating, he's so cheating
ok ok ok
unlucky
go next
"""),
    },
    "blocks": {
        "slots": {
            "item": choices(
                "oak logs | cobble | iron | torches | glass | bread | redstone | string | coal | sand | wool"
            ),
            "build": choices("barn | tower | bridge | castle | mine shaft | storage room | sheep pen | lighthouse"),
            "dir": choices("past the river | behind spawn | by the mountain | up north | near the swamp"),
        },
        "lines": lines_of("""
the creeper blew up the {build}
who's got a spare pickaxe
i'm building a path {dir}
can someone make more {item}
i've been ages looking for {item}
{n} come see the {build}
we need a better door on the {build}
the cows got out again
there's a shipwreck {dir}
i'm fishing, leave me alone
what's the seed again
i put all the {item} in the chest
the {build} needs a roof
it's raining, great
my boat's gone
{n} where'd you go
i found diamonds, no way
creeper creeper creeper
who took my {item}
there's a village {dir}
i'm still doing the {build}
can someone bring me {item}
i died in lava, everything's gone
ok don't touch the {build}
that's my chest {n}
it's getting dark get inside
the farm's broken again
who let the sheep out
follow the torches
phantoms ugh i need to sleep
sleep, everyone sleep
{n} get in a bed
i'm mining down
the portal's behind the {build}
i need more {item}
give me like a stack of {item}
enderman, don't look at it
my villager got zombified
i'm making a {build} for the cows
who dug this hole
i fell in someone's hole
there's a skeleton shooting me from somewhere
the {build} looks sick {n}
wait i'm stuck in the {build}
how do you make a hopper again
i'm going {dir}
{n} can you light up the {build}
why is there lava in the {build}
"""),
        "cheer": lines_of("""
nice
that's so cool
oh my god
ahh
noooo
lets go
rip my stuff
wait that's sick
lmao the sheep
"""),
    },
    "carball": {
        "slots": {
            "where": choices("back post | mid | on the wall | in net | corner | up top"),
        },
        "lines": lines_of("""
nice pass {n}
i'm rotating
go for it, i'm covering
one more goal
boost's {where}
he's going {where}
watch the wall
clear it clear it
you take kickoff {n}
i'll cheat up
that was so close
thirty seconds
just defend now
how did that not go in
flick, he's going to flick
ball's yours {n}
i'm going
rotate back rotate back
i have no boost
take it take it
my bad
whiffed
i'm last man
i'm {where}
demo him
he's got no boost
kickoff, i'll go
faking
one minute left
overtime lets go
no way that went in
ceiling shot??
bump him
pass it mid
leave it leave it
goalie goalie
{n} you were ball chasing again
we're up two
we're down one push push
i'm {where}, i'm {where}
centre it
he's flipping, careful
i got the boost {where}
we can't concede here
that kickoff was terrible
{n} go go go
i'm staying back
that bounce was so weird
the ball's just rolling {where}
"""),
        "cheer": lines_of("""
what a save
nice shot
calculated
wow
close one
thanks
no problem
what a save!
ohh
sick
sorry!
noooo
"""),
    },
    "scrap": {
        "slots": {
            "loot": choices(
                "gold bar | brass bell | big bolt | toy robot | cash register | rubber duck | fancy lamp | clown "
                "horn | metal sheet | jar of pickles"
            ),
            "room": choices(
                "vent room | big hallway | storage bit | basement | main entrance | little corridor | pipe room | "
                "stairwell"
            ),
            "quota": choices("a hundred | eighty | a hundred and sixty | like ninety"),
        },
        "lines": lines_of("""
my suit's broken
i'm low on stamina
the door's jammed
{n} hold the door
i've got the {loot}
don't leave me here
is the ship still there
it's so dark in the {room}
there's a ladder in the {room}
i'm going back, i'm full
who bought the shovel
i think it's following me
the lights just went out
we've got like two minutes
check the {room}
i found a {loot}
there's something in the {room}
{n} are you alive
he's dead he's dead
close the door close the door
ship's leaving in like a minute
we need {quota} more for quota
who's on the terminal
open the big door {n}
i hear footsteps
don't go in there
the thing with the mask is back
the coil guy is in the {room}
i'm carrying two things
flashlight's dying
run run run
turret on the left
i dropped the {loot} by the {room}
get in get in
lock it
i'm scanning
mines everywhere, watch it
{n} don't step there
i'm lost
where's the fire exit
it's raining on this moon, careful
quicksand, watch out
is that you breathing or the monster
i'm selling the {loot}
the {room} is clear i think
{n} come back to the ship
what was that noise
oh no oh no oh no
"""),
        "cheer": lines_of("""
we made quota
lets go
we're so dead
i'm crying
noooo
hello??
why would you do that
classic
unreal
"""),
    },
}
