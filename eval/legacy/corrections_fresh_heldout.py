# ruff: noqa: E501
"""Held-out wording pools of the fresh corrections set (eval/recipes/corrections_fresh.py).

Written before the dev pools and kept apart from them: no topic, no statement, correction
or question wording here is used by the dev split. Each topic is a dict:

- ``cat``: the topic kind (the probe's ``category``);
- ``values``: distinctive strings, three of them drawn per session (old, middle, latest);
- ``stmt``: the original statement, ``{v}`` the value;
- ``cue`` / ``bare`` / ``neg``: corrections with a change word, a bare restatement, and
  "not {old}, it's {v}";
- ``pron``: (lead line, correction) pairs; the correction never names the thing;
- ``ask`` / ``ans``: a question about the old value and the answer carrying the new one;
- ``restate``: the current value said again, no change;
- ``distract``: same-topic lines that are not about the fact (no value);
- ``q``: the end-of-session question, in other words than statement and corrections.
"""

from typing import Any

HELDOUT_TOPICS: list[dict[str, Any]] = [
    {
        "cat": "count",
        "values": ["twenty-three people", "thirty-one people", "seventeen people", "forty-four people", "nineteen people", "twenty-eight people"],
        "stmt": [
            "right, headcount for Gran's surprise party is {v} so far, I've been ringing round all week",
            "so for Gran's surprise do we're looking at {v} in total, that's everyone who replied",
        ],
        "cue": [
            "update on Gran's party, more replies came in, it's actually {v} now",
            "correction on the surprise party numbers, we're at {v} after all",
        ],
        "bare": [
            "okay so I'll tell the caterers {v} for Gran's party",
            "{v} for the surprise do, got it, I'll sort the chairs",
        ],
        "pron": [
            ("how many have said yes to the thing for Gran?", "loads of her bridge club said yes, so make that {v}"),
            ("did Auntie's lot reply about the party?", "they did, and a couple dropped out, so call it {v}"),
        ],
        "ask": [
            "are we still at {old} for Gran's surprise party?",
            "is it definitely {old} coming to Gran's thing?",
        ],
        "ans": [
            "no, the final list says {v}",
            "not anymore, it went up to {v} with the neighbours",
        ],
        "neg": [
            "it's not {old} for Gran's party, it's {v}, I miscounted the cousins",
            "sorry, not {old}, it's {v} for the surprise do",
        ],
        "restate": [
            "still {v} for Gran's party, nothing's changed there",
            "just confirming it's {v} at the surprise do, I've told the hall",
        ],
        "distract": [
            "Gran's last birthday she cried at the cake, it was lovely",
            "the hall we've booked for Gran smells a bit of floor polish",
            "does anyone know if Gran still hates balloons",
        ],
        "q": [
            "how many guests should the caterers plan food for at Gran's do?",
            "what's the final number of folk turning up to celebrate Gran?",
        ],
    },
    {
        "cat": "colour",
        "values": ["burnt orange", "teal and silver", "mustard yellow", "navy with white stripes", "lime green", "dusty pink"],
        "stmt": [
            "for the charity fun run I've ordered the team shirts in {v}",
            "the fun run shirts are going to be {v}, the printer had loads of that",
        ],
        "cue": [
            "change of plan on the fun run shirts, the printer ran out, we're going with {v} instead",
            "scratch what I said about the fun run shirts, they'll be {v}",
        ],
        "bare": [
            "{v} shirts for the fun run it is then, I'll wear my white trainers",
            "nice, the {v} fun run shirts will look great in the photos",
        ],
        "pron": [
            ("the printer emailed about the order for the run", "yeah they can only do {v} now, so that's what we're getting"),
            ("did you see the proof they sent over?", "I asked them to switch it to {v}, looks way better"),
        ],
        "ask": [
            "are the fun run shirts still {old}?",
            "did the run shirts stay {old} in the end?",
        ],
        "ans": [
            "no, they swapped us to {v}",
            "nope, they're coming in {v}",
        ],
        "neg": [
            "the fun run shirts aren't {old}, they're {v}",
            "not {old} for the run shirts, {v}, I read the invoice wrong",
        ],
        "restate": [
            "got the tracking number for the {v} fun run shirts",
            "yeah the {v} run shirts are still on order",
        ],
        "distract": [
            "last year's fun run I got a blister the size of a coin",
            "we raised about six hundred for the hospice at the last run",
            "the fun run route goes right past the duck pond apparently",
        ],
        "q": [
            "what shade will our tops be for the charity race?",
            "which colour are we wearing for the sponsored jog?",
        ],
    },
    {
        "cat": "size",
        "values": ["a four-berth tunnel tent", "a six-berth family tent", "a two-person pop-up tent", "a three-room canvas tent", "an ultralight one-person tent"],
        "stmt": [
            "for the festival I'm buying {v}, it was on offer at the outdoor shop",
            "I've picked {v} for the festival, should fit all our stuff",
        ],
        "cue": [
            "actually I took the festival tent back, I've gone for {v} instead",
            "change of plan on the tent for the festival, it's {v} now",
        ],
        "bare": [
            "so {v} for the festival, I'll bring the mallet",
            "{v}, cool, I'll pack my roll mat for the festival",
        ],
        "pron": [
            ("did you sort out what we're sleeping in at the festival?", "returned the first one, got {v} instead, much roomier"),
            ("the one you bought looked tiny in the photo", "I know, I swapped it for {v}"),
        ],
        "ask": [
            "are we still sleeping in {old} at the festival?",
            "is it still {old} you're bringing to the festival?",
        ],
        "ans": [
            "no, I exchanged it for {v}",
            "not anymore, we've got {v} now",
        ],
        "neg": [
            "it's not {old} for the festival, it's {v}",
            "no no, not {old}, I bought {v} for the festival",
        ],
        "restate": [
            "pitched {v} in the garden to test it for the festival, all good",
            "still got {v} ready for the festival",
        ],
        "distract": [
            "the festival lineup dropped and it's mostly bands I've never heard of",
            "my brother's festival tent flooded once, he slept in the car",
            "do the festival toilets get worse each day or is that a myth",
        ],
        "q": [
            "what are we kipping under at the music weekend?",
            "what shelter have we got for the nights at the music weekend?",
        ],
    },
    {
        "cat": "deadline",
        "values": ["the fourteenth by noon", "end of day on the ninth", "the twenty-first at five", "first thing on the third", "the eleventh before midnight"],
        "stmt": [
            "the group report for the module has to be submitted {v}, it's on the portal",
            "heads up, our marketing report is due {v}",
        ],
        "cue": [
            "update, the lecturer moved the report deadline, it's now {v}",
            "actually the portal changed, the marketing report is due {v}",
        ],
        "bare": [
            "okay, so {v} for the report, I'll have my section done early",
            "{v} for the marketing report then, I'll set a reminder",
        ],
        "pron": [
            ("did you read the email from the module leader?", "yeah, they pushed it to {v} because of the strike"),
            ("the portal looks different today", "that's because it's {v} now, they extended it"),
        ],
        "ask": [
            "is the report still due {old}?",
            "are we still handing in the marketing report {old}?",
        ],
        "ans": [
            "no, she extended it to {v}",
            "no, it's been moved to {v}",
        ],
        "neg": [
            "the report isn't due {old}, it's {v}, I checked twice",
            "not {old} for the marketing report, {v}",
        ],
        "restate": [
            "reminder, marketing report still due {v}",
            "the portal still says {v} for the report, so we're fine",
        ],
        "distract": [
            "my last group report someone just copied wikipedia and we all lost marks",
            "the module leader takes ages to mark stuff anyway",
            "does the report need harvard referencing or whatever it's called",
        ],
        "q": [
            "when's the cut-off for handing in our uni write-up?",
            "by when must the group write-up be uploaded?",
        ],
    },
    {
        "cat": "vehicle",
        "values": ["a silver Skoda estate", "a seven-seater Ford Galaxy", "an electric Kia Niro", "a red Toyota minibus", "a battered camper van"],
        "stmt": [
            "for the road trip to the lakes I've hired {v} from the place by the station",
            "the lakes road trip car is sorted, we're getting {v}",
        ],
        "cue": [
            "bad news on the lakes trip, the hire place messed up, so we've got {v} instead",
            "change of plan for the lakes road trip, I've booked {v}",
        ],
        "bare": [
            "{v} for the lakes, brilliant, I'll do the first leg",
            "so I'm picking up {v} for the lakes on Friday morning",
        ],
        "pron": [
            ("the hire company rang me back about the booking", "they've given us {v}, which is honestly better"),
            ("did they fix the problem with the booking?", "sort of, we're getting {v} now"),
        ],
        "ask": [
            "are we still taking {old} to the lakes?",
            "is it still {old} for the lakes road trip?",
        ],
        "ans": [
            "no, the hire place swapped us to {v}",
            "nope, they gave us {v} in the end",
        ],
        "neg": [
            "we're not getting {old} for the lakes, it's {v}",
            "not {old}, it's {v} for the road trip",
        ],
        "restate": [
            "confirmation email came through for {v}, lakes trip is on",
            "yep still {v} for the lakes",
        ],
        "distract": [
            "the last road trip we did the satnav sent us down a farm track",
            "does anyone get car sick on windy roads, the lakes are all bends",
            "petrol prices near the lakes are daylight robbery",
        ],
        "q": [
            "what are we driving up north in for the holiday?",
            "which motor did we end up renting for the trip up north?",
        ],
    },
    {
        "cat": "route",
        "values": ["the ridge path past the quarry", "the lakeside loop", "the old railway line", "the forestry track from the car park", "the coastal cliff path"],
        "stmt": [
            "for Sunday's hike I reckon we take {v}, it's about nine miles",
            "I've planned Sunday's walk along {v}",
        ],
        "cue": [
            "change for Sunday's hike, the council closed a bit of it, so we're doing {v}",
            "actually for the Sunday walk let's do {v}, the other way is flooded",
        ],
        "bare": [
            "{v} on Sunday, lovely, I'll bring a flask",
            "so {v} for the hike, I'll download the map offline",
        ],
        "pron": [
            ("I looked at the map for the weekend walk", "we should go along {v}, less mud"),
            ("the trail app says part of it's shut", "then let's just do {v}"),
        ],
        "ask": [
            "are we still walking {old} on Sunday?",
            "is Sunday's hike still along {old}?",
        ],
        "ans": [
            "no, it's {v} now because of the closure",
            "no, we switched to {v}",
        ],
        "neg": [
            "not {old} on Sunday, we're doing {v}",
            "the hike isn't {old} anymore, it's {v}",
        ],
        "restate": [
            "weather looks fine for {v} on Sunday",
            "still doing {v}, I've charged my power bank",
        ],
        "distract": [
            "my walking boots are falling apart, the sole's come loose",
            "last time we hiked it hailed for an hour straight",
            "do we need to bring sandwiches or is there a cafe at the end",
        ],
        "q": [
            "which way are we trekking at the weekend?",
            "which trail are we following for the weekend ramble?",
        ],
    },
    {
        "cat": "activity",
        "values": ["go-karting at the retail park", "axe throwing in the old warehouse", "indoor climbing at the bouldering wall", "crazy golf on the pier", "paintball in the woods", "a glassblowing workshop"],
        "stmt": [
            "for Jamal's stag, well, the afternoon bit, I've booked {v}",
            "the stag afternoon is sorted, we're doing {v}",
        ],
        "cue": [
            "change of plan for the stag afternoon, they cancelled on us, so it's {v}",
            "update on the stag do, we're doing {v} instead now",
        ],
        "bare": [
            "{v} for the stag, class, Jamal's going to love it",
            "okay so {v} on the stag afternoon, I'll wear old clothes",
        ],
        "pron": [
            ("the place for the stag emailed saying they're double booked", "so I got us into {v} instead"),
            ("Jamal's brother wasn't keen on what we picked", "fair, let's swap it for {v}"),
        ],
        "ask": [
            "are we still doing {old} for Jamal's stag?",
            "is the stag afternoon still {old}?",
        ],
        "ans": [
            "no, we're doing {v} now",
            "nah, switched it to {v}",
        ],
        "neg": [
            "not {old} for the stag, it's {v}",
            "the stag afternoon isn't {old}, it's {v}",
        ],
        "restate": [
            "paid the deposit for {v} for the stag",
            "still on for {v} at the stag, nobody's complained",
        ],
        "distract": [
            "Jamal's stag is going to be messy, his mates are animals",
            "my cousin's stag ended with someone losing a shoe in a canal",
            "do we need matching t-shirts for the stag or is that cringe",
        ],
        "q": [
            "what's the fun bit we're doing before the drinks for the groom-to-be?",
            "what are we up to in the daytime for the lads' weekend before the wedding?",
        ],
    },
    {
        "cat": "budget",
        "values": ["fifteen quid each", "twenty-five quid each", "a tenner each", "thirty-five quid each", "eighteen pounds a head"],
        "stmt": [
            "for Mum's retirement present I think we should put in {v}",
            "collection for the retirement gift is {v}, I'll send my bank details",
        ],
        "cue": [
            "actually for the retirement gift it's {v}, Dad wants to chip in less than we thought",
            "change on the retirement present, let's make it {v}",
        ],
        "bare": [
            "{v} for the retirement gift, sent it just now",
            "okay {v} for Mum's present, I'll transfer tonight",
        ],
        "pron": [
            ("Dad said the watch is cheaper than we thought", "then we only need {v}"),
            ("my brother's skint this month", "let's just do {v} then so nobody's stretched"),
        ],
        "ask": [
            "is it still {old} for Mum's present?",
            "are we all putting in {old} for the retirement gift?",
        ],
        "ans": [
            "no, it came down to {v}",
            "no, it's {v} now",
        ],
        "neg": [
            "not {old} for the retirement gift, it's {v}",
            "it's not {old}, it's {v} for Mum's present",
        ],
        "restate": [
            "reminder, it's {v} for Mum's present, I've had three of you so far",
            "yeah {v} for the retirement gift, still short a couple",
        ],
        "distract": [
            "Mum says she's going to take up bowls when she retires",
            "her work are doing a cake for her last day too",
            "my mate's dad retired and was bored within a week",
        ],
        "q": [
            "how much is everybody chipping in towards the leaving gift for our mother?",
            "what's the contribution per person for our mother's leaving present?",
        ],
    },
    {
        "cat": "film",
        "values": ["that Korean zombie train film", "the director's cut of Blade Runner", "a Studio Ghibli double bill", "the original Alien", "the second Paddington"],
        "stmt": [
            "for movie night at mine I've lined up {v}",
            "movie night's sorted, we're watching {v}",
        ],
        "cue": [
            "change of plan for movie night, we're watching {v} instead",
            "scratch the movie night pick, let's do {v}",
        ],
        "bare": [
            "{v} at movie night, I'll bring the popcorn",
            "ooh {v}, I'm in for movie night",
        ],
        "pron": [
            ("my sister's coming and she hates gore", "then let's put on {v}, she'll be fine with that"),
            ("I've seen the one you picked like four times", "fine, we'll do {v} then"),
        ],
        "ask": [
            "are we still watching {old} at movie night?",
            "is movie night still {old}?",
        ],
        "ans": [
            "no, we're doing {v} now",
            "nah, we switched to {v}",
        ],
        "neg": [
            "not {old} at movie night, it's {v}",
            "we're not watching {old}, it's {v}",
        ],
        "restate": [
            "downloaded {v} for movie night so the wifi can't ruin it",
            "still {v} for movie night, bring blankets",
        ],
        "distract": [
            "the projector at mine makes a weird buzzing noise, ignore it",
            "last movie night everyone fell asleep halfway through",
            "do we want pizza or curry for movie night",
        ],
        "q": [
            "what's on the screen when we all come round to watch something?",
            "what are we putting on when the gang comes over for the film evening?",
        ],
    },
]
