"""Dev sessions 007-008 of the fourth corrected-facts set (eval/recipes/corrections_fourth.py --split dev).

Same shape as eval/legacy/corrections_fourth_dev_facts_a.py, written fresh for the dev split.
"""

from __future__ import annotations

SESSIONS: list[dict[str, object]] = [
    {
        "seed": 61007,
        "title": "real-time strategy team games while organising a baby shower",
        "speakers": ["Teodor", "Abena", "Hassan", "Dagny"],
        "game": "rts",
        "facts": [
            {
                "cat": "time",
                "style": "question",
                "say": [("a", "right so jo's baby shower starts at twelve thirty on the saturday")],
                "change": [
                    [
                        ("b", "is it still twelve thirty for jo's thing?"),
                        ("c", "no it's two thirty now, she's got a scan that morning"),
                    ]
                ],
                "new": [("a", "2:30 then, i'll eat beforehand")],
                "noise": [("~", "how long do these things go on, is it like an all day thing")],
                "q": "clanky, what hour does the thing for the mum-to-be begin?",
                "expect": ["two thirty", "2:30"],
                "stale": ["twelve thirty"],
            },
            {
                "cat": "place",
                "style": "split",
                "say": [("a", "it's at her sister's house in fernhill, the one with the big conservatory")],
                "old": [("d", "fernhill's like forty minutes on the bus for me")],
                "change": [
                    [
                        ("c", "wait the venue bit"),
                        ("c", "it's the garden centre cafe now, her sister's got builders in"),
                    ]
                ],
                "new": [("b", "the garden centre does amazing scones to be fair")],
                "noise": [("~", "is it one of those ones where men aren't allowed or is that old school")],
                "q": "clanky, where are we headed for the baby do?",
                "expect": ["garden centre"],
                "stale": ["fernhill"],
            },
            {
                "cat": "number",
                "style": "negation",
                "say": [("a", "i'm doing a cake with thirty cupcakes round the outside")],
                "change": [[("b", "not thirty cupcakes, jo says forty eight, half her office is coming")]],
                "new": [("a", "forty eight, my oven is gonna die")],
                "noise": [("~", "are you doing blue or pink icing or is that a reveal thing")],
                "q": "clanky, how many of the small bakes do i need to make?",
                "expect": ["forty eight"],
                "stale": ["thirty cupcakes"],
            },
            {
                "cat": "person",
                "style": "twice",
                "say": [("a", "mikkel's organising the games bit, he loves that stuff")],
                "change": [
                    [("b", "mikkel's gone to his in-laws, pernille says she'll run the games")],
                    [
                        ("c", "ok the games person is changing again"),
                        ("c", "it's gonna be anwen running them, pernille's got a migraine"),
                    ],
                ],
                "new": [("d", "anwen's perfect, she's so organised")],
                "noise": [("~", "please no games where you have to taste baby food, i'm begging")],
                "q": "clanky, who's hosting the party activities?",
                "expect": ["anwen"],
                "stale": ["mikkel", "pernille"],
            },
            {
                "cat": "item",
                "style": "by_other",
                "say": [("a", "everyone bring a onesie as the present, newborn size")],
                "change": [[("b", "about the present you mentioned, jo's drowning in those, bring nappies instead")]],
                "new": [("c", "nappies are the boring but correct choice")],
                "noise": [("~", "do you wrap stuff for these or just put it in a bag")],
                "q": "clanky, what am i buying for the little one?",
                "expect": ["nappies"],
                "stale": ["onesie"],
            },
            {
                "cat": "date",
                "style": "bare",
                "say": [("a", "the shower's the first saturday of april, jo picked it")],
                "change": [[("b", "jo's moved the shower to the last saturday of april, her mum's away before then")]],
                "new": [("c", "last saturday of april, noted in my calendar")],
                "noise": [("~", "when's she actually due again")],
                "q": "clanky, when's the celebration for the baby happening?",
                "expect": ["last saturday of april"],
                "stale": ["first saturday of april"],
            },
            {
                "cat": "plan",
                "style": "cue",
                "say": [("a", "main activity's a baby photo quiz, you guess who's who")],
                "old": [("c", "baby photo quiz, i look like a potato in all of mine")],
                "change": [[("a", "change of plans, we're doing pottery painting instead, jo found a place")]],
                "new": [("d", "pottery painting, i'm making jo an ashtray as a joke")],
                "noise": [("~", "please tell me there's no games with a blindfold")],
                "q": "clanky, what are we spending the afternoon doing at the shower?",
                "expect": ["pottery painting"],
                "stale": ["baby photo quiz"],
            },
            {
                "cat": "name",
                "style": "lead_in",
                "say": [("a", "jo says they're going with poppy if it's a girl")],
                "change": [
                    [
                        ("b", "she was on the phone to her mum earlier about it"),
                        ("~", "and?"),
                        ("d", "they've gone off it, it's gonna be marigold"),
                    ]
                ],
                "new": [("c", "marigold is so pretty")],
                "noise": [("~", "her partner wanted something weird, like a star name")],
                "q": "clanky, what are they naming the kid?",
                "expect": ["marigold"],
                "stale": ["poppy"],
            },
        ],
    },
    {
        "seed": 61008,
        "title": "ghost hunting co-op while sorting a halloween costume party",
        "speakers": ["Kofi", "Esperanza", "Bastien", "Ulla", "Hiroshi"],
        "game": "ghosts",
        "facts": [
            {
                "cat": "time",
                "style": "negation",
                "say": [("a", "halloween party starts at nine pm, dress up or don't bother coming")],
                "change": [[("b", "not nine pm anymore, the landlord wants us out by midnight, so half seven")]],
                "new": [("c", "half seven, ok, i'll do my face before work then")],
                "noise": [("~", "is it the kind of party where people actually dance")],
                "q": "clanky, when should i rock up in my costume?",
                "expect": ["half seven"],
                "stale": ["nine pm"],
            },
            {
                "cat": "place",
                "style": "question",
                "say": [("a", "party's in the function room above the red lion")],
                "change": [
                    [
                        ("b", "is it still at the red lion?"),
                        ("c", "nope, moved to the old cinema on bridge street, they do events now"),
                    ]
                ],
                "new": [("d", "the old cinema is such a good spot for it, it's creepy already")],
                "noise": [("~", "can we get there on foot or is it a taxi job")],
                "q": "clanky, which venue's hosting the spooky night?",
                "expect": ["old cinema"],
                "stale": ["red lion"],
            },
            {
                "cat": "number",
                "style": "lead_in",
                "say": [("a", "tickets are eight pounds on the door")],
                "change": [
                    [
                        ("b", "they've added a dj and free shots"),
                        ("~", "oh nice"),
                        ("d", "so it's twelve pounds now, sorry guys"),
                    ]
                ],
                "new": [("a", "twelve pounds is fine for free shots honestly")],
                "noise": [("~", "do they do card or do i need to find a cashpoint")],
                "q": "clanky, what's entry going to cost me?",
                "expect": ["twelve pounds"],
                "stale": ["eight pounds"],
            },
            {
                "cat": "person",
                "style": "cue",
                "say": [("a", "my flatmate oona's doing everyone's face paint before we go")],
                "change": [[("a", "actually not oona, she's working, it's my mate ravindra doing the makeup")]],
                "new": [("c", "ravindra did my zombie face last year, it was terrifying")],
                "noise": [("~", "i'm not sitting still for an hour though")],
                "q": "clanky, who's sorting the gory bits on our skin?",
                "expect": ["ravindra"],
                "stale": ["oona"],
            },
            {
                "cat": "item",
                "style": "twice",
                "say": [("a", "everyone bring a pumpkin to carve, there's a prize for the best one")],
                "change": [
                    [("b", "the venue said no pumpkins, bring a skeleton balloon")],
                    [
                        ("c", "ok the decoration thing changed again"),
                        ("c", "bring fairy lights, balloons are banned too now"),
                    ],
                ],
                "new": [("d", "fairy lights, i've got a whole box of them")],
                "noise": [("~", "who even makes these rules, it's a halloween party")],
                "q": "clanky, what am i carrying in with me for the decor?",
                "expect": ["fairy lights"],
                "stale": ["pumpkin", "skeleton balloon"],
            },
            {
                "cat": "date",
                "style": "far",
                "say": [("a", "party's on the friday before halloween, obviously")],
                "old": [("b", "friday before halloween, i'll take the saturday off to recover")],
                "change": [
                    [
                        ("d", "so the venue's got a wedding on that friday"),
                        ("d", "it's the saturday after halloween now"),
                    ]
                ],
                "noise": [("~", "halloween always sneaks up on me every year")],
                "q": "clanky, which night is the fancy dress thing?",
                "expect": ["saturday after halloween"],
                "stale": ["friday before halloween"],
            },
            {
                "cat": "plan",
                "style": "bare",
                "say": [("a", "there's gonna be a costume contest at eleven")],
                "change": [[("b", "the organisers swapped the contest for a treasure hunt round the building")]],
                "new": [("c", "treasure hunt in a creepy building, yeah i'm staying near the exit")],
                "noise": [("~", "is there a prize or is it just bragging rights")],
                "q": "clanky, what's the main event at the do?",
                "expect": ["treasure hunt"],
                "stale": ["costume contest"],
            },
            {
                "cat": "name",
                "style": "split",
                "say": [("a", "our group costume theme is the addams family")],
                "change": [
                    [
                        ("c", "oh the group theme"),
                        ("c", "we're going as ghostbusters now, way easier to make"),
                    ]
                ],
                "new": [("b", "ghostbusters, i'm already ordering the jumpsuit")],
                "noise": [("~", "do we all have to match or just sort of")],
                "q": "clanky, what are we dressing as together?",
                "expect": ["ghostbusters"],
                "stale": ["addams family"],
            },
        ],
    },
]
