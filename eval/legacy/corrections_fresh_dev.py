# ruff: noqa: E501
"""Dev wording pools of the fresh corrections set (eval/recipes/corrections_fresh.py).

Same shape as eval/legacy/corrections_fresh_heldout.py (see its docstring); no topic or wording
here is shared with the held-out pools.
"""

from typing import Any

DEV_TOPICS: list[dict[str, Any]] = [
    {
        "cat": "time",
        "values": ["quarter past eight", "half seven", "ten to nine", "twenty past seven", "quarter to eight"],
        "stmt": [
            "so the Friday team dinner is booked for {v}, I rang them this morning",
            "Friday dinner with the team, table's at {v}",
        ],
        "cue": [
            "change of plan for Friday dinner, they could only do {v}",
            "scratch that time for the team dinner, it's {v} now",
        ],
        "bare": [
            "see you all at {v} on Friday then",
            "{v} Friday, I'll leave work early",
        ],
        "pron": [
            ("the restaurant called back about our booking", "they've shifted us to {v}, the early slot was gone"),
            ("I can't get there that early on Friday", "no worries, I've moved it to {v}"),
        ],
        "ask": [
            "is the Friday dinner still at {old}?",
            "are we still eating at {old} on Friday?",
        ],
        "ans": [
            "no, they moved us to {v}",
            "nope, it's {v} now",
        ],
        "neg": [
            "it's not {old} on Friday, it's {v}, I wrote it down wrong",
            "not {old}, {v} for the team dinner",
        ],
        "restate": [
            "just to say it's still {v} on Friday for the dinner",
            "yep, {v} Friday, the booking's confirmed",
        ],
        "distract": [
            "last year's team dinner was a disaster, the food came out cold",
            "my boss always orders the most expensive wine at these dinners",
            "are partners invited to the team dinner or just us",
        ],
        "q": [
            "what time do we need to turn up for the work meal?",
            "when should I arrive for the meal with colleagues?",
        ],
    },
    {
        "cat": "place",
        "values": ["the Marigold Bistro", "the Blue Anchor", "the Crooked Spoon", "the Lotus Garden", "the rooftop bar at the Grand"],
        "stmt": [
            "drinks before the gig on Saturday are at {v}, it's near the venue",
            "I've told everyone we're meeting at {v} before the gig",
        ],
        "cue": [
            "actually, pre-gig drinks are moving to {v}, the other place is shut for a private do",
            "change of plan, we're meeting at {v} before the gig",
        ],
        "bare": [
            "{v} before the gig, perfect, I'll get the first round",
            "so I'll head straight to {v} on Saturday",
        ],
        "pron": [
            ("that pub is miles from the venue though", "let's make it {v} instead, it's closer"),
            ("the reviews for where we picked are awful", "fair, {v} then, they do decent chips"),
        ],
        "ask": [
            "are we still doing drinks at {old} before the gig?",
            "is it still {old} on Saturday?",
        ],
        "ans": [
            "no, we moved it to {v}",
            "no, it's {v} now",
        ],
        "neg": [
            "not {old}, we're going to {v} before the gig",
            "it isn't {old} on Saturday, it's {v}",
        ],
        "restate": [
            "still meeting at {v} Saturday, I'll be there from six",
            "reminder, {v} before the gig",
        ],
        "distract": [
            "the support act for the gig is apparently terrible",
            "last gig we went to I lost my voice for two days",
            "do we know if the venue lets you bring water in",
        ],
        "q": [
            "where do we all gather for a pint ahead of the show?",
            "which pub or bar are we having a drink in before the concert starts?",
        ],
    },
    {
        "cat": "day",
        "values": ["next Tuesday evening", "the Thursday after next", "this coming Monday night", "Wednesday the sixteenth"],
        "stmt": [
            "board game night at mine is {v}, I'll get snacks in",
            "okay, board game night is going to be {v}",
        ],
        "cue": [
            "scratch that, board game night has to be {v}, my flatmate has people over",
            "update, board game night is now {v}",
        ],
        "bare": [
            "{v} for board games, I'll bring Catan",
            "so {v} at yours, I'm in for board games",
        ],
        "pron": [
            ("my flatmate booked the living room for her book club", "so can we push it to {v}?"),
            ("I'm working late that day now", "let's just do {v} instead then"),
        ],
        "ask": [
            "is board game night still {old}?",
            "are we still playing board games {old}?",
        ],
        "ans": [
            "no, it's {v} now",
            "nope, moved to {v}",
        ],
        "neg": [
            "board game night isn't {old}, it's {v}",
            "not {old}, {v} for board games",
        ],
        "restate": [
            "still on for {v}, I've cleared the table",
            "board games {v}, don't forget",
        ],
        "distract": [
            "last board game night someone flipped the Monopoly board",
            "I've bought that new co-op game with the zombies",
            "can we ban Risk, it takes six hours",
        ],
        "q": [
            "which evening are we meeting up to play tabletop stuff?",
            "when is the tabletop get-together happening?",
        ],
    },
    {
        "cat": "price",
        "values": ["forty-two pounds fifty", "sixty-eight quid", "thirty-nine ninety-nine", "fifty-five with booking fees", "seventy-three pounds"],
        "stmt": [
            "tickets for the Arctic tour concert are {v} each, I'll buy them in one go",
            "I checked, the concert tickets come to {v} a person",
        ],
        "cue": [
            "actually, I got that wrong, the concert tickets are {v} each",
            "correction on the tickets, they're {v} each",
        ],
        "bare": [
            "{v} each for the concert, I'll send you the money now",
            "okay {v} a ticket, fine by me",
        ],
        "pron": [
            ("the resale site had them cheaper", "yeah I found them for {v} there"),
            ("the price went up when the second date was announced", "they're {v} now, annoyingly"),
        ],
        "ask": [
            "are the concert tickets still {old}?",
            "was it {old} for a ticket?",
        ],
        "ans": [
            "no, they came to {v} in the end",
            "no, {v} each",
        ],
        "neg": [
            "the tickets aren't {old}, they're {v}",
            "not {old}, {v} each for the concert",
        ],
        "restate": [
            "sent everyone a payment link for {v}",
            "yeah {v} each, still waiting on two of you",
        ],
        "distract": [
            "my sister's festival tickets cost an absolute fortune",
            "the queue on the ticket site was forty thousand people",
            "do we want standing or seats for the concert",
        ],
        "q": [
            "how much do I owe for getting into the show?",
            "what's the cost per head for the gig passes?",
        ],
    },
    {
        "cat": "person_task",
        "values": ["my cousin Delphine", "Ollie from work", "Marguerite next door", "Tobias's older brother", "the landlord's son"],
        "stmt": [
            "for the cottage holiday, {v} is picking up the keys on the way",
            "keys for the holiday cottage, {v} is collecting them",
        ],
        "cue": [
            "change of plan on the cottage keys, {v} is getting them instead",
            "actually it's {v} picking up the cottage keys now",
        ],
        "bare": [
            "cool, so {v} has the keys, I'll text them the address",
            "{v} with the keys then, sorted",
        ],
        "pron": [
            ("the person who was grabbing them can't make it now", "I've asked {v} to do it instead"),
            ("who's getting them if that falls through?", "{v} said they could, they're passing that way"),
        ],
        "ask": [
            "is {old} still getting the cottage keys?",
            "is it {old} collecting the keys?",
        ],
        "ans": [
            "no, {v} is doing it now",
            "no, it's {v}",
        ],
        "neg": [
            "not {old}, {v} is getting the keys",
            "it isn't {old} with the keys, it's {v}",
        ],
        "restate": [
            "just checked, {v} is still fine for the keys",
            "{v} confirmed the key pickup again",
        ],
        "distract": [
            "the cottage has a hot tub apparently, nobody tell my mum",
            "last holiday cottage we had, the oven didn't work",
            "is there signal at the cottage or are we off grid",
        ],
        "q": [
            "who's fetching the door key of the place we're renting for the getaway?",
            "which person sorts out getting us into the rental for the getaway?",
        ],
    },
    {
        "cat": "item",
        "values": ["a folding gazebo", "the big cool box", "a portable barbecue", "the badminton set", "a crate of sparkling elderflower"],
        "stmt": [
            "for the park picnic on Sunday I'm bringing {v}",
            "picnic on Sunday, I've got {v} covered",
        ],
        "cue": [
            "change of plan for the picnic, I'll bring {v} instead",
            "actually for the picnic I'm bringing {v}, the other thing's broken",
        ],
        "bare": [
            "nice, {v} for the picnic then",
            "{v}, great, that's the picnic sorted",
        ],
        "pron": [
            ("someone else already said they'd bring that", "ah okay, I'll bring {v} instead then"),
            ("I think that's banned in the park now", "let's bring {v} instead"),
        ],
        "ask": [
            "are you still bringing {old} to the picnic?",
            "is it still {old} from you for Sunday?",
        ],
        "ans": [
            "no, I'm bringing {v}",
            "nope, {v} now",
        ],
        "neg": [
            "not {old}, I'm bringing {v} to the picnic",
            "I'm not bringing {old}, I'm bringing {v}",
        ],
        "restate": [
            "got {v} in the boot already for Sunday",
            "still bringing {v} to the picnic, don't worry",
        ],
        "distract": [
            "the last picnic we had, wasps ate everything",
            "is the park busy on Sundays, we might not get a spot",
            "do we need a blanket or are there benches",
        ],
        "q": [
            "what's {s} carrying along to the outdoor lunch?",
            "what did {s} promise to haul to the lunch on the grass?",
        ],
    },
    {
        "cat": "game_role",
        "values": ["the dwarf paladin", "a frost mage", "the resto druid", "a shadow priest", "the orc warrior"],
        "stmt": [
            "for Thursday's raid I'm going to play {v}",
            "raid on Thursday, I'll be {v}",
        ],
        "cue": [
            "scratch that, I'm switching to {v} for the raid",
            "change of plan, I'll go {v} for Thursday's raid",
        ],
        "bare": [
            "{v} it is then for Thursday",
            "okay {v}, I'll gear up",
        ],
        "pron": [
            ("we've got too many of that class already", "fine, I'll roll {v} instead"),
            ("the comp looks a bit light on support", "then I'll bring {v}"),
        ],
        "ask": [
            "are you still going {old} for the raid?",
            "is it still {old} on Thursday?",
        ],
        "ans": [
            "no, I'm going {v}",
            "no, {v} now",
        ],
        "neg": [
            "not {old}, I'm playing {v}",
            "I'm not {old} anymore, I'm {v}",
        ],
        "restate": [
            "levelling {v} tonight for the raid",
            "still {v} for Thursday",
        ],
        "distract": [
            "the last raid boss wiped us nine times",
            "patch notes nerfed half the classes again",
            "do we have enough people for the raid or should we pug",
        ],
        "q": [
            "which class is {s} bringing to the dungeon run?",
            "what character will {s} be in the group fight at the end of the week?",
        ],
    },
    {
        "cat": "room",
        "values": ["the Late Night Lounge", "the Bravo-Two channel", "the Quiet Corner", "Scrim Room B", "the Overflow Annex"],
        "stmt": [
            "for the tournament we're all in {v} on the server",
            "tournament voice is going to be {v}",
        ],
        "cue": [
            "change for the tournament, mods want us in {v}",
            "actually use {v} for the tournament, the other one's full",
        ],
        "bare": [
            "{v} for the tournament, I'll pin it",
            "joining {v} then",
        ],
        "pron": [
            ("the mods said that one's reserved for casters", "we'll use {v} then"),
            ("there's already a stream in there", "move us to {v}"),
        ],
        "ask": [
            "are we still in {old} for the tournament?",
            "is tournament voice still {old}?",
        ],
        "ans": [
            "no, {v} now",
            "no, it moved to {v}",
        ],
        "neg": [
            "not {old}, we're in {v}",
            "tournament isn't in {old}, it's {v}",
        ],
        "restate": [
            "pinned {v} in the tournament chat",
            "still {v} for the tournament",
        ],
        "distract": [
            "the tournament brackets are posted, we got a hard draw",
            "last tournament our mic setup was a mess",
            "are casters streaming the tournament",
        ],
        "q": [
            "which voice space on the Discord do we hop into for the competition?",
            "where on the Discord are we gathering for the competitive event?",
        ],
    },
    {
        "cat": "code_word",
        "values": ["blue pelican", "copper kettle", "midnight tangerine", "velvet hammer", "silent walrus"],
        "stmt": [
            "the password for the private lobby tonight is {v}",
            "private lobby code word is {v}, don't share it",
        ],
        "cue": [
            "change of plan, someone leaked it, the lobby password is now {v}",
            "actually the private lobby password is {v} now",
        ],
        "bare": [
            "{v}, got it, joining the lobby",
            "typing {v} into the lobby now",
        ],
        "pron": [
            ("randoms got in earlier", "I changed it to {v}"),
            ("that one's too easy to guess", "use {v} instead"),
        ],
        "ask": [
            "is the lobby password still {old}?",
            "is it still {old} to get in?",
        ],
        "ans": [
            "no, it's {v}",
            "no, I reset it to {v}",
        ],
        "neg": [
            "not {old}, the password is {v}",
            "it isn't {old}, it's {v}",
        ],
        "restate": [
            "lobby's up, password still {v}",
            "yeah it's {v}, works for me",
        ],
        "distract": [
            "last time the lobby got full of randoms within a minute",
            "can we make the lobby friends only",
            "the lobby keeps kicking me for idle",
        ],
        "q": [
            "what do I type to get into our closed match?",
            "what phrase unlocks our invite-only game?",
        ],
    },
]
