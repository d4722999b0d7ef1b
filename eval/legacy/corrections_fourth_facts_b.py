"""Sessions 003-004 of the fourth corrected-facts set (eval/recipes/corrections_fourth.py).

Same shape as corrections_fourth_facts_a: say / change / old / new / noise lines by roles a-d
("~" for a filler by anyone), the probe `q`, and the `expect` / `stale` value forms.
"""

from __future__ import annotations

SESSIONS: list[dict[str, object]] = [
    {
        "seed": 40403,
        "title": "car football ranked, signing up for a charity five-a-side",
        "speakers": ["Yusuf", "Marisol", "Pavel", "Ingrid"],
        "game": "carball",
        "facts": [
            {
                "cat": "time",
                "style": "far",
                "say": [("a", "first game kicks off at ten am, so like, be early")],
                "old": [("b", "ten am on a weekend is criminal")],
                "change": [
                    [("c", "oh they sent the fixtures"), ("c", "our first one's not till quarter to twelve now")]
                ],
                "new": [("a", "11:45 is way better, i can sleep")],
                "noise": [("~", "how long are the games, like ten minutes each half?")],
                "q": "clanky when's our opening match?",
                "expect": ["quarter to twelve", "11:45"],
                "stale": ["ten am"],
            },
            {
                "cat": "place",
                "style": "cue",
                "say": [("a", "it's at westbrook leisure centre, the outdoor pitches")],
                "change": [[("b", "change of plans, it's on the astro at st mary's school, westbrook flooded")]],
                "new": [("c", "st mary's, is that the one by the bus depot")],
                "noise": [("~", "parking there is always horrendous")],
                "q": "clanky where's the tournament being held?",
                "expect": ["st mary's"],
                "stale": ["westbrook"],
            },
            {
                "cat": "number",
                "style": "negation",
                "say": [("a", "entry is thirty quid for the team, i'll pay and you lot send it back")],
                "change": [[("b", "uh entry's not thirty anymore, it's forty five, they added a ref fee")]],
                "new": [("c", "sent you my share of the £45")],
                "noise": [("~", "is it for charity though, like where does the money go")],
                "q": "clanky how much did the sign-up cost us?",
                "expect": ["forty five", "£45"],
                "stale": ["thirty quid"],
            },
            {
                "cat": "person",
                "style": "twice",
                "say": [("a", "my brother lukas is gonna go in goal, he's tall at least")],
                "change": [
                    [("b", "lukas can't, he's got his driving test, so my mate jonno's in goal")],
                    [
                        ("c", "bad news, jonno pulled his hamstring"),
                        ("c", "so thandiwe's going in net, she played at uni"),
                    ],
                ],
                "new": [("a", "thandiwe is genuinely better than all of us")],
                "noise": [("~", "do we even have subs")],
                "q": "clanky who's our keeper?",
                "expect": ["thandiwe"],
                "stale": ["lukas", "jonno"],
            },
            {
                "cat": "item",
                "style": "bare",
                "say": [("a", "everybody bring shin pads, the ref's strict about it apparently")],
                "change": [[("b", "so yeah bring a white shirt, the organisers said that's literally all you need")]],
                "noise": [("~", "do i need proper boots or are trainers fine")],
                "q": "clanky, what gear should i turn up with?",
                "expect": ["white shirt"],
                "stale": ["shin pads"],
            },
            {
                "cat": "date",
                "style": "lead_in",
                "say": [("a", "they've put us in the one on the 3rd")],
                "change": [
                    [
                        ("b", "i can't do that weekend, it's my cousin's wedding"),
                        ("~", "noo"),
                        ("c", "ok i'll ask them to stick us in the one on the 17th then"),
                    ]
                ],
                "new": [("a", "the 17th works for everyone yeah?")],
                "noise": [
                    (
                        "~",
                        "is it the same one we did two years ago, where someone got a yellow in like the first minute",
                    )
                ],
                "q": "clanky, what day is the football thing?",
                "expect": ["the 17th"],
                "stale": ["the 3rd"],
            },
            {
                "cat": "plan",
                "style": "question",
                "say": [("a", "after, we're all going for a curry, losers pay")],
                "change": [
                    [("b", "are we still doing curry after?"), ("c", "nah everyone wants the beer garden at the fox")]
                ],
                "new": [("d", "beer garden, perfect, it's meant to be sunny")],
                "noise": [("~", "where did we go after last year's one, i genuinely don't remember")],
                "q": "clanky what's happening once the matches are done?",
                "expect": ["beer garden"],
                "stale": ["curry"],
            },
            {
                "cat": "name",
                "style": "by_other",
                "say": [("a", "i registered us as dribble trouble")],
                "change": [
                    [("b", "oh that thing you did on the website, someone already had it, so we're net gains now")]
                ],
                "new": [("c", "net gains lmao who came up with that")],
                "noise": [("~", "do we get our names on the shirts or is that extra")],
                "q": "clanky what's our squad called?",
                "expect": ["net gains"],
                "stale": ["dribble trouble"],
            },
        ],
    },
    {
        "seed": 40404,
        "title": "co-op scrap runs on a haunted moon, organising a mate's flat move",
        "speakers": ["Kwame", "Zofia", "Arjun", "Chloe", "Mateus"],
        "game": "scrap",
        "facts": [
            {
                "cat": "time",
                "style": "split",
                "say": [("a", "for nadia's move, be at the old flat for nine sharp")],
                "change": [
                    [
                        ("b", "oh for the moving thing"),
                        ("b", "get there for like ten fifteen, the keys aren't ready till ten"),
                    ]
                ],
                "new": [("c", "10:15, cool, extra sleep")],
                "noise": [("~", "how much stuff does she even have, it's a one bed")],
                "q": "clanky when do we start shifting furniture?",
                "expect": ["ten fifteen", "10:15"],
                "stale": ["nine sharp"],
            },
            {
                "cat": "place",
                "style": "bare",
                "say": [("a", "we're getting the van from the depot on canal street")],
                "change": [[("b", "van's at the airport hire place, i got a cheaper one there")]],
                "new": [("c", "the airport's miles though, who's taking me")],
                "noise": [("~", "does anyone actually know how to drive something that big")],
                "q": "clanky, where are we collecting the truck from?",
                "expect": ["airport"],
                "stale": ["canal street"],
            },
            {
                "cat": "number",
                "style": "by_other",
                "say": [("a", "i've booked the van for four hours, should be loads")],
                "change": [[("b", "about that, i've made it six hours, the lift in her building is broken")]],
                "noise": [("~", "last time we moved someone it took literally all day")],
                "q": "clanky how long have we got the hire for?",
                "expect": ["six hours"],
                "stale": ["four hours"],
            },
            {
                "cat": "person",
                "style": "cue",
                "say": [("a", "priyanka's driving the van, she's done it before")],
                "change": [[("c", "actually my uncle desmond is driving, priyanka's not on the insurance")]],
                "new": [("d", "desmond drives like it's a rally, pray for the fridge")],
                "noise": [("~", "who's riding in the back with the sofa lol")],
                "q": "clanky, who's behind the wheel on the day?",
                "expect": ["desmond"],
                "stale": ["priyanka"],
            },
            {
                "cat": "item",
                "style": "twice",
                "say": [("a", "everyone bring bin bags, she's got so much random stuff")],
                "change": [
                    [("b", "scratch that, bring bubble wrap, she's got bags")],
                    [
                        ("c", "ok bubble wrap's covered, her work gave her a massive roll"),
                        ("c", "bring a screwdriver set, the wardrobe has to come apart"),
                    ],
                ],
                "noise": [("~", "is she keeping that horrible armchair")],
                "q": "clanky, what am i meant to grab before heading over?",
                "expect": ["screwdriver"],
                "stale": ["bin bags", "bubble wrap"],
            },
            {
                "cat": "date",
                "style": "far",
                "say": [("a", "the move's the 9th, that's the saturday")],
                "change": [[("b", "landlord pushed it back, it's the 16th now")]],
                "new": [("c", "the 16th, noted")],
                "noise": [("~", "my last move was in the snow, never doing that again")],
                "q": "clanky which day are we helping nadia?",
                "expect": ["the 16th"],
                "stale": ["the 9th"],
            },
            {
                "cat": "plan",
                "style": "lead_in",
                "say": [("a", "then pizza at her new place after to say thanks")],
                "change": [
                    [
                        ("b", "she won't have an oven or plates or anything though"),
                        ("c", "ok we'll grab fish and chips then, eat it on the floor"),
                    ]
                ],
                "noise": [("~", "she better feed us, i'm not carrying a wardrobe for free")],
                "q": "clanky, what's the food plan once everything's moved?",
                "expect": ["fish and chips"],
                "stale": ["pizza"],
            },
            {
                "cat": "name",
                "style": "negation",
                "say": [("a", "the wifi at the new place is marmalade, all lowercase")],
                "change": [[("b", "forget marmalade, she changed it, it's gooseberry now")]],
                "noise": [("~", "does the new flat even have internet yet")],
                "q": "clanky what do i type to get online at her flat?",
                "expect": ["gooseberry"],
                "stale": ["marmalade"],
            },
        ],
    },
]
