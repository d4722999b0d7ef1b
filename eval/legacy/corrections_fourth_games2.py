"""More in-game callouts for the fourth corrected-facts set (eval/recipes/corrections_fourth.py).

Same shape as corrections_fourth_games.GAMES: `slots`, `lines` with {slot} placeholders ({n} is
another speaker's name) and `cheer`, one callout a line.
"""

from __future__ import annotations

from eval.legacy.corrections_fourth_games import choices, lines_of

GAMES: dict[str, dict[str, object]] = {
    "footy": {
        "slots": {
            "pos": choices("near post | far post | the edge of the box | the left | the right | the middle"),
        },
        "lines": lines_of("""
line up the wall
i'm in goal, don't worry
cut it back
the ref's against us
overlap overlap
{n} i'm free, i'm free
he's got no one on him
how is that not a penalty
we need a goal
keep it, don't rush
get it wide
who's taking the corner
their keeper's off his line
lofted through, now
he's offside, play on
cross it
i'm open
pass pass
shoot
offside again??
ref's blind
{n} track back
who's marking their striker
corner
go {pos}
i'm holding the line
through ball now
get in
header
keeper's rubbish
switch it
don't tackle in the box
penalty
he dived
red card lmao
half time
my stamina's gone
drop back drop back
i'll take the free kick
square it
press press
i'm at {pos}
play it to {pos}
{n} stop shooting from there
their winger is so fast
why did you pass back
i had so much space {pos}
one more and we win
hold it, hold it
"""),
        "cheer": lines_of("""
goal!
what was that
unreal
get in!
nooo
what a strike
robbed
that's a foul
lets go lads
how did that miss
"""),
    },
    "mining": {
        "slots": {
            "ore": choices("gold | morkite | nitra | the big crystal | that egg"),
            "dir": choices("up top | on the left | behind us | down the hole | on the ceiling"),
        },
        "lines": lines_of("""
dig here dig here
i'm calling resupply
the cave's huge
{n} where are you
i'm on the {ore}
fuel for the drill
watch out, exploder
there's a leech {dir}
on my way
i've got a heavy
mission's done, go go
the bot's on the loose
i'm putting up a turret
i'll carry the egg
bring the mule {dir}
did i hear a rock and stone
swarm incoming
resupply down
need a resupply
{n} i'm down
revive me revive me
leave no dwarf behind
i'm on the mule
call the drop pod
there's gold {dir}
mining the {ore}
{ore} over here
i'm out of ammo
bugs {dir}
big one, big one
flares please
i'm doing ziplines
platforms up
watch the drop
oops that was my grenade
sorry for the friendly fire
the dreadnought is here
pod's landing, run
{n} the pod, get to the pod
i'm grabbing the {ore}
shoot the weak spot
i can't see anything, flare
who's got the drill
i'm stuck {dir}
{ore} {dir}, come look
"""),
        "cheer": lines_of("""
rock and stone
rock and stone!
for karl
we're rich
good job team
rock and stone brother
yeahhh
no no no
karl would be proud
"""),
    },
    "party": {
        "slots": {
            "thing": choices("a horse | a potato | a duck | the eiffel tower | a wizard | a toaster | a banana"),
        },
        "lines": lines_of("""
is this about me
i don't get the prompt
that's cheating {n}
how do you draw {thing}
mine's the one with the hat
everyone's answer is the same
who's winning
{n} you're so good at this
i want a rematch
just draw a circle
you have five seconds
oh that's {thing}
the audience voted
bonus round?
i can't think of anything
what is that supposed to be
is it {thing}
it's {thing} with a hat
{n} you drew {thing}
oh i know this one
no idea
who wrote this lol
vote for mine
the timer the timer
i panicked
that's so dumb
i'm so bad at drawing
that prompt is cursed
ok that one's funny
how am i losing
final round
triple points this round
my answer got no votes
that's clearly {thing}
i typed that so fast
why is everyone voting for {n}
this is rigged
{n} that was you, admit it
i drew {thing} and it came out like {thing}
whose is the one about the goose
read it out, read it out
i voted for myself
next round next round
"""),
        "cheer": lines_of("""
lmaooo
i'm crying
no way
stop
that's genius
i hate this game
boo
cheater
ok that's good
"""),
    },
    "pirate": {
        "slots": {
            "side": choices("left | right | front | back | port | starboard"),
            "thing": choices("wood | cannonballs | bananas | planks"),
        },
        "lines": lines_of("""
we're taking water
anchor up, go
i'm on the crow's nest
{n} take the wheel
turn {side} now
reload reload
we're on fire
put it out
they're boarding us
i'm on the cannon
lower the sail
i've got the chest
there's loot in the water
follow the birds
sell the skull
ship ahead
skeleton ship
raise the anchor
{n} bail bail
we're sinking
patch the holes
i'm on the wheel
cannons loaded
fire
missed
hit them
storm incoming
drop the sails
turn {side}, {side}
board them
i'm on their ship
treasure chest
sell it at the outpost
kraken
shark shark
i'm swimming back
where's the island
map says north
megalodon
need {thing}
{n} grab the {thing}
i'm repairing
hole on the {side}
they're on our {side}
who's steering
we hit a rock
{n} get the mermaid
bucket, someone bucket
"""),
        "cheer": lines_of("""
yo ho
we're rich
lets go
we're so dead
noooo
lmao
good shot
sink them
hahaha
"""),
    },
}
