"""Dev sessions 005-006 of the fourth corrected-facts set (eval/recipes/corrections_fourth.py --split dev).

Same shape as eval/legacy/corrections_fourth_dev_facts_a.py, written fresh for the dev split.
"""

from __future__ import annotations

SESSIONS: list[dict[str, object]] = [
    {
        "seed": 61005,
        "title": "chaotic co-op kitchen levels while sorting a friends' christmas dinner",
        "speakers": ["Fatima", "Lorcan", "Hyejin", "Dario", "Esme", "Nikolai"],
        "game": "kitchen",
        "facts": [
            {
                "cat": "time",
                "style": "split",
                "say": [("a", "friendsmas dinner, we're eating at four in the afternoon")],
                "old": [("b", "four in the afternoon is perfect, i'll skip lunch")],
                "change": [
                    [
                        ("c", "oh wait the dinner timing"),
                        ("c", "we're eating at quarter to seven, the turkey takes forever in that oven"),
                    ]
                ],
                "new": [("d", "6:45, fine, i'm still skipping lunch")],
                "noise": [("~", "who's on washing up, i'm saying it now, not me")],
                "q": "clanky, when's food on the table at the xmas do?",
                "expect": ["quarter to seven", "6:45"],
                "stale": ["four in the afternoon"],
            },
            {
                "cat": "place",
                "style": "bare",
                "say": [("a", "dinner's at the community hall on elm road, i've booked the kitchen there")],
                "change": [[("b", "the hall double booked us, we've moved it to the scout hut by the park")]],
                "new": [("c", "scout hut has that massive long table, that's ideal")],
                "noise": [("~", "is there parking round there or should i get a cab")],
                "q": "clanky, where's the festive meal being held?",
                "expect": ["scout hut"],
                "stale": ["elm road"],
            },
            {
                "cat": "number",
                "style": "by_other",
                "say": [("a", "secret santa limit is twenty five pounds, no more, no going over")],
                "change": [[("b", "that santa budget you said, we all voted, it's thirty five pounds now")]],
                "new": [("d", "thirty five pounds, ok i can actually get something decent")],
                "noise": [("~", "last year someone gave me a single candle, i'm still hurt")],
                "q": "clanky, how much am i allowed to spend on my gift person?",
                "expect": ["thirty five pounds"],
                "stale": ["twenty five pounds"],
            },
            {
                "cat": "person",
                "style": "far",
                "say": [("a", "my cousin birgit's bringing the turkey, she's got the huge roasting tray")],
                "old": [("c", "birgit's the one who made that insane trifle, right")],
                "change": [
                    [
                        ("d", "birgit's flight got moved so she can't make it now"),
                        ("d", "thaddeus is bringing the bird, he's already ordered one"),
                    ]
                ],
                "noise": [("~", "is a whole bird even gonna fit in that oven")],
                "q": "clanky, who's sorting the roast for christmas?",
                "expect": ["thaddeus"],
                "stale": ["birgit"],
            },
            {
                "cat": "item",
                "style": "cue",
                "say": [("a", "for the table everyone bring crackers, like the pull ones with the hats")],
                "change": [[("a", "update, my mum's sorted crackers, bring a bottle of mulled wine instead")]],
                "new": [("d", "mulled wine, say less")],
                "noise": [("~", "the jokes in those things are always so bad")],
                "q": "clanky, what am i supposed to turn up holding for the dinner?",
                "expect": ["mulled wine"],
                "stale": ["crackers"],
            },
            {
                "cat": "date",
                "style": "lead_in",
                "say": [("a", "the dinner's on the 20th of december, everyone's off by then")],
                "change": [
                    [
                        ("b", "my work do just landed on that exact day, ugh"),
                        ("~", "ahh no"),
                        ("c", "let's just move it to the 18th of december then, everyone's free that one"),
                    ]
                ],
                "new": [("a", "18th of december, locked in")],
                "noise": [("~", "do we do it before or after everyone goes home to their families")],
                "q": "clanky, what date did we pick for the festive get together?",
                "expect": ["18th of december"],
                "stale": ["20th of december"],
            },
            {
                "cat": "plan",
                "style": "question",
                "say": [("a", "after we eat it's the christmas film marathon, all the home alones")],
                "change": [
                    [
                        ("b", "are we still doing the film marathon?"),
                        ("c", "nah carol singing round the estate, it was esme's nan's idea"),
                    ]
                ],
                "new": [("d", "carol singing, i only know the first verse of anything")],
                "noise": [("~", "someone's gonna fall asleep on the sofa by eight")],
                "q": "clanky, what's happening after pudding?",
                "expect": ["carol singing"],
                "stale": ["film marathon"],
            },
            {
                "cat": "name",
                "style": "negation",
                "say": [("a", "the group chat's called santa's little helpers, join it")],
                "change": [[("b", "it's not santa's little helpers anymore, dario renamed it the sprout squad")]],
                "new": [("c", "the sprout squad, dario's proudest moment")],
                "noise": [("~", "can someone stop sending gifs in there at 3am")],
                "q": "clanky, what's the thread titled at the moment?",
                "expect": ["sprout squad"],
                "stale": ["santa's little helpers"],
            },
        ],
    },
    {
        "seed": 61006,
        "title": "island survival base building while planning for a cousin's wedding",
        "speakers": ["Wren", "Ibrahim", "Solveig", "Cormac", "Mirela", "Yuki"],
        "game": "survival",
        "facts": [
            {
                "cat": "time",
                "style": "lead_in",
                "say": [("a", "the coach to the wedding goes at half eleven from outside the station")],
                "change": [
                    [
                        ("b", "my cousin just messaged the family group"),
                        ("~", "uh oh"),
                        ("c", "coach is going at one fifteen now, the vicar's running behind"),
                    ]
                ],
                "new": [("d", "1:15 from the station, got it")],
                "noise": [("~", "is there a toilet on the coach, asking for me")],
                "q": "clanky, when do i need to be waiting for the bus to the ceremony?",
                "expect": ["one fifteen", "1:15"],
                "stale": ["half eleven"],
            },
            {
                "cat": "place",
                "style": "twice",
                "say": [("a", "reception's at hartwell manor, the posh one with the peacocks")],
                "change": [
                    [("b", "they moved the reception to the village hall, the manor flooded")],
                    [
                        ("c", "ok reception venue changed again lol"),
                        ("c", "it's in a marquee on the field next door, the village hall's too small"),
                    ],
                ],
                "new": [("a", "a marquee in october, bring a coat")],
                "noise": [("~", "will there be a free bar or do i need to bring cash")],
                "q": "clanky, where's the party after the vows?",
                "expect": ["marquee"],
                "stale": ["hartwell manor", "village hall"],
            },
            {
                "cat": "number",
                "style": "bare",
                "say": [("a", "the hotel's holding nine rooms for our side of the family")],
                "change": [[("b", "the hotel's only got five rooms left, the rest went to her side")]],
                "new": [("c", "five rooms for all of us, i'm sharing with someone then")],
                "noise": [("~", "does the hotel do breakfast or is it one of those ones")],
                "q": "clanky, how many bedrooms have we got for the wedding weekend?",
                "expect": ["five rooms"],
                "stale": ["nine rooms"],
            },
            {
                "cat": "person",
                "style": "by_other",
                "say": [("a", "my uncle ferdie's doing the readings at the service")],
                "change": [[("b", "the readings thing, it's your cousin ottilie now, ferdie gets too nervous")]],
                "new": [("c", "ottilie's got the voice for it honestly")],
                "noise": [("~", "i hope it's not the really long one from the bible")],
                "q": "clanky, who's getting up to read at the church?",
                "expect": ["ottilie"],
                "stale": ["ferdie"],
            },
            {
                "cat": "item",
                "style": "split",
                "say": [("a", "dress code's tweed, we all need a flat cap apparently")],
                "change": [
                    [
                        ("c", "about the dress code thing"),
                        ("c", "it's bow ties now, the bride changed her mind"),
                    ]
                ],
                "new": [("d", "i'll get a bow tie that clips on, i can't tie them")],
                "noise": [("~", "do i have to buy a whole suit or can i borrow one")],
                "q": "clanky, what accessory am i wearing to the wedding?",
                "expect": ["bow tie"],
                "stale": ["flat cap"],
            },
            {
                "cat": "date",
                "style": "cue",
                "say": [("a", "the wedding's on june twelfth, it's a saturday")],
                "change": [[("a", "change of plans, it's june twenty sixth now, the church had a clash")]],
                "new": [("b", "june twenty sixth, i'll book the time off")],
                "noise": [("~", "is it the same weekend as your brother's thing")],
                "q": "clanky, what's the big date for the couple?",
                "expect": ["june twenty sixth"],
                "stale": ["june twelfth"],
            },
            {
                "cat": "plan",
                "style": "far",
                "say": [("a", "day after, we're all doing a hangover brunch at the hotel")],
                "old": [("c", "hangover brunch is the only part i actually care about")],
                "change": [
                    [
                        ("d", "the brunch place is shut on sundays, i checked"),
                        ("d", "so we're doing a walk along the cliffs instead"),
                    ]
                ],
                "new": [("b", "a cliff walk with a hangover, great plan")],
                "noise": [("~", "my feet are gonna be dead from dancing")],
                "q": "clanky, what's on the morning once it's all over?",
                "expect": ["walk along the cliffs", "cliff walk"],
                "stale": ["hangover brunch"],
            },
            {
                "cat": "name",
                "style": "question",
                "say": [("a", "our table at the reception is the thistle table")],
                "change": [
                    [
                        ("b", "are we still on thistle?"),
                        ("c", "no they named all the tables after films, we're the casablanca table"),
                    ]
                ],
                "new": [("d", "casablanca, fancy, we'd better behave")],
                "noise": [("~", "please don't put me next to the kids' table")],
                "q": "clanky, which seating name do we look for at the do?",
                "expect": ["casablanca"],
                "stale": ["thistle"],
            },
        ],
    },
]
