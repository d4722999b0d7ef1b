"""Wording pools of the third corrections set (eval/recipes/corrections_third.py): speakers,
the lines that carry a change (change words, negations, answers), and the ordinary chatter
around the facts. The facts themselves are in eval/legacy/corrections_third_topics*.py."""

from __future__ import annotations

# Our own group of regulars; each session draws 4 to 6 of them.
SPEAKERS: tuple[str, ...] = ("Tomasz", "Ines", "Kofi", "Saoirse", "Dmitri", "Noor", "Wendell", "Lupe",
                             "Hamish", "Yara", "Bastien", "Mei")

GAMES: tuple[tuple[str, str], ...] = (
    ("Helldivers", "bug planet dives"), ("Deep Rock", "mining runs"), ("Rocket League", "ranked twos and threes"),
    ("Apex", "trios"), ("Overwatch", "quick play"), ("Phasmophobia", "ghost hunts"),
    ("Minecraft", "the new survival world"), ("Risk of Rain", "long loops"),
)

# --- the lines that carry a change -------------------------------------------------------
CUE: tuple[str, ...] = (
    "Scratch that, {set}.", "Change of plan, {set}.", "Actually, {set}.", "Oh, actually, {set}, sorry.",
    "Update: {set}.", "Wait, no, correction: {set}.", "Hang on, new plan, {set}.",
    "Ignore what I said before, {set}.", "Quick change, {set}.", "Oh, I forgot to say, it's changed, {set}.",
)
BARE: tuple[str, ...] = (
    "Right, so {set}.", "Okay so {set}.", "{set}.", "Cool, {set} then.", "Yeah so {set}, sorted.",
    "Alright, {set}.", "Right, {set}, lovely.", "So {set}. Good.",
)
NEGATION: tuple[str, ...] = (
    "Not {old} anymore, {set}.", "It's not {old} now by the way, {set}.",
    "Heads up, it isn't {old} anymore, {set}.", "So it's not {old}, {set}.",
    "Just so nobody turns up wrong: not {old}, {set}.",
)
TWO_TURN_ANSWER: tuple[str, ...] = (
    "Nah, it's {v} now.", "No, {v}, keep up.", "Not anymore, it's {v}.", "Nope, {v}, it changed.",
    "No no, {v}. Did nobody read the group chat?", "That changed, it's {v}.",
)
OTHER_PERSON_INTRO: tuple[str, ...] = (
    "Oh, on that, {pro}.", "Yeah about that, {pro}.", "Ah, {pro}, I meant to say.", "Right, {pro}.",
    "Oh, I forgot to tell you, {pro}.",
)
FAR_INTRO: tuple[str, ...] = (
    "Oh, before I forget, ", "Totally unrelated but ", "Random, but ", "While I remember, ", "",
)
PRONOUN_INTRO: tuple[str, ...] = ("Yeah, ", "Hmm, ", "Sure, ", "Go on then, ", "", "")  # only before a value

QUESTION_OPENERS: tuple[str, ...] = ("", "", "Sorry, ", "Quick one, ", "Remind me, ")

# --- chatter ----------------------------------------------------------------------------
GAME_LINES: tuple[str, ...] = (
    "Reloading, cover me.", "I'm down, I'm down, someone pick me up.", "Nice shot!", "Behind you, behind you!",
    "I've got no ammo at all.", "Who took the last med kit?", "Push now, they're weak.", "Fall back, fall back.",
    "I'm going left, someone come with me.", "That was so close.", "Did anyone see where that came from?",
    "Stop shooting me, I'm on your team!", "Objective's up, let's go.", "I'm stuck on a rock, hold on.",
    "We need to revive him first.", "I'm at the drop pod.", "Somebody ping the big one.",
    "Okay that was my fault, I pulled too many.", "Ult's ready when you are.", "I've got the extract.",
    "One more round and then a break?", "Wait for me, I'm slow.", "Heal, heal, heal!",
    "Who's got the spare battery?", "Flank's open, go go go.", "I swear that hit me through the wall.",
    "Careful, there's a trap at the door.", "Good game, good game.", "I'm respawning in ten.",
    "Can somebody carry the loot?", "This lobby is full of sweats.", "I'm going to hold this corner.",
    "Get on the point!", "They've got a sniper on the roof.", "I'm out of grenades.", "Lovely teamwork that.",
    "Who's leading this? Because it's not working.", "Give me a second, I'm in the menu.",
    "Loading screen, sorry.", "Grab the ammo box before you leave.",
)
GAME_TEMPLATES: tuple[str, ...] = (
    "{n} on {spot}, {state}.", "There's {n} coming from {spot}.", "I'm on {spot}, {state}.",
    "Watch {spot}, {state}.", "{state}, they're at {spot}.", "Rotate to {spot}, now.",
)
SPOTS: tuple[str, ...] = (
    "the left ramp", "the big tree", "the bridge", "the blue container", "the roof", "the tunnel",
    "the back door", "the crates", "the garage", "the hill", "the water tower", "the top floor", "mid",
)
COUNTS: tuple[str, ...] = ("one", "two", "three", "a couple", "loads", "a whole pack", "four")
STATES: tuple[str, ...] = (
    "one's really low", "they're all full health", "I'm cracked", "I've got no shield", "careful",
    "they're reviving", "one's lit", "I'm tagging them", "don't peek", "I'm holding",
)
TECH_LINES: tuple[str, ...] = (
    "Can you hear me? My mic went weird.", "You're cutting out a bit.", "Sorry, I was muted.",
    "Someone's got an echo.", "My internet just did a thing.", "Is it just me or is the lag awful?",
    "Hang on, Discord's updating.", "I think my headset's dying, it's on four percent.",
    "Can somebody turn their game sound down? I can hear it through your mic.",
    "You sound like a robot right now.", "My fan's going mental, sorry if that's loud.",
    "I'll rejoin, hold on.", "I can't hear anyone now. Oh wait, there you are.",
    "Push to talk is broken again.", "Your mic's fine now.", "You were frozen for about ten seconds.",
    "My router's in the other room, that's the problem.", "Somebody's keyboard is so loud.",
    "Sorry, that was my cat walking on the desk.", "Did it just crash for everyone?",
    "Is your noise suppression on? You sound underwater.", "Back, sorry, had to restart.",
)
BANTER_LINES: tuple[str, ...] = (
    "Ha, that's brilliant.", "No way.", "You're joking.", "I'm crying.", "That's the worst thing I've ever heard.",
    "Absolutely not.", "Fair enough.", "Mate.", "Yeah, true.", "Honestly, same.", "Wait, what?",
    "Who taught you to play like that?", "That's going in the clips channel.", "Don't look at me.",
    "I was never here.", "That's tragic.", "Classic.", "Love that for you.", "You've got to be kidding me.",
    "I've peaked, it's all downhill from here.", "That's a skill issue.", "I'm not even mad, that was good.",
    "Somebody clip that.", "Stop, I can't breathe.", "Bold move.", "That's exactly what I'd have done.",
    "Oh no.", "Sorry, what were we saying?", "Mhm.", "Yeah.", "Right.", "Okay.", "Lol.", "Go on then.",
)
FOOD_LINES: tuple[str, ...] = (
    "I'm starving, I've not had tea yet.", "Just made beans on toast, living the dream.",
    "Does anyone else put crisps in their sandwiches?", "I'm eating cereal at this hour, don't judge me.",
    "Brew break, two minutes.", "My flatmate made a lasagne and ate the whole thing.",
    "Pizza's here, I'm on mute for a bit.", "I've had about four coffees, I'm vibrating.",
    "Is pineapple on pizza still a debate?", "Those new crisps are rank, don't buy them.",
    "I'm on a diet, which is why I'm eating a whole bag of Maltesers.", "Toast is the best food, fight me.",
    "Got a kebab on the way home, no regrets.", "My mum's sent me home with a tub of soup the size of a bucket.",
)
FOOD_TEMPLATES: tuple[str, ...] = (
    "Anyone else having {food} tonight?", "I've just burnt my {food}, brilliant.",
    "Who wants to hear about the {food} I had at lunch?", "I could murder some {food} right now.",
)
FOODS: tuple[str, ...] = (
    "cheese toastie", "noodles", "fish finger sandwich", "jacket potato", "ramen", "chips and gravy",
    "chilli", "scrambled eggs", "fajitas", "sausage roll",
)
WEATHER_LINES: tuple[str, ...] = (
    "It's absolutely chucking it down here.", "Is it windy where you are? My bins just blew over.",
    "I had to scrape the car this morning, in this month.", "It's so muggy, I've got the window open.",
    "Sun's finally out and I'm sat inside playing games.", "There was hail earlier, actual hail.",
    "The forecast said dry and I got soaked walking to the shop.", "It's freezing, I've got two jumpers on.",
    "Fog's so thick I can't see the houses across the road.", "Thunder just now, did you hear that?",
)
LIFE_LINES: tuple[str, ...] = (
    "Work was a nightmare today, don't ask.", "My dog's snoring next to me, it's so loud.",
    "I've got a dentist appointment I'm dreading.", "My neighbour's drilling again, sorry if you hear it.",
    "I finally fixed the shower, I'm a plumber now.", "My kid's asleep so I've got to be quiet.",
    "I started running last week. I stopped running last week.", "My landlord still hasn't fixed the boiler.",
    "I've got a job interview on Monday, wish me luck.", "My car failed its MOT, on the wipers.",
    "I watched three episodes of that baking show instead of sleeping.", "My sister's moving to Glasgow.",
    "I joined a choir, don't laugh.", "Got a new plant, it's already dying.",
    "The bus was forty minutes late this morning.", "I've been on hold with the bank for an hour today.",
    "My cat learned to open the fridge.", "I found a tenner in my old coat.",
)
LIFE_TEMPLATES: tuple[str, ...] = (
    "My {who} keeps {doing}, it's driving me mad.", "Did I tell you my {who} started {doing}?",
    "Sorry, my {who} is {doing} in the background.",
)
WHO: tuple[str, ...] = ("flatmate", "brother", "nan", "neighbour", "little sister", "uncle", "housemate")
DOING: tuple[str, ...] = (
    "learning the trumpet", "hoovering at midnight", "watching true crime", "singing in the shower",
    "doing a jigsaw on the kitchen table", "asking me about crypto", "buying air fryers", "baking sourdough",
)
QUESTIONS: tuple[str, ...] = (
    "What are you all doing this weekend, apart from the obvious?", "Has anyone seen that new detective series?",
    "Who's winning the fantasy league?", "Did anyone actually do the reading for book club?",
    "Is it just me or has this patch made everything worse?", "What's everyone's go-to karaoke song?",
    "Anyone want to start a group for the marathon? Joking.", "What's the best biscuit, go.",
)
ANSWERS: tuple[str, ...] = (
    "Chocolate digestives, obviously.", "Probably nothing, sleep.", "I've seen the first one, it's decent.",
    "Not a chance.", "Ask me tomorrow.", "I'll think about it.", "Mine's terrible this year.",
)

# Little exchanges between two or three people, placed whole.
EXCHANGES: tuple[tuple[str, ...], ...] = (
    ("Can you hear me now?", "Yeah, loud and clear.", "Finally."),
    ("Is anyone else's game stuttering?", "Mine's fine.", "Must be your potato PC then."),
    ("Who ate all the snacks in the ship?", "Not me.", "It was definitely you."),
    ("I think I left the oven on.", "Go check, we'll wait.", "Back, it was off. Panic over."),
    ("Has anyone got a charger for a controller?", "Under the telly, I think.", "Found it, cheers."),
    ("What's that noise?", "My washing machine on spin.", "Sounds like it's taking off."),
    ("Did you see the match last night?", "Only the second half.", "You missed the only good bit."),
    ("Rate my loadout out of ten.", "Four.", "Generous."),
    ("Okay, who's got the lowest kills?", "Don't.", "I think we all know."),
    ("Should I buy the new skin?", "No.", "Yes, obviously.", "Thanks, that's really helpful."),
    ("My internet dropped, what did I miss?", "Nothing, we just died.", "Standard."),
    ("Is it raining where you are?", "Sideways.", "Same here, my washing's ruined."),
    ("Can we do one more?", "One more.", "It's never one more."),
    ("I'm getting a drink, anyone want anything?", "A tea, two sugars.", "You're not even in my house."),
    ("How are you this good at this?", "Practice.", "No life, you mean."),
    ("Wait, where's everyone gone?", "We're at the objective.", "Which way is that?"),
    ("Does anyone know how to mute the music?", "Audio settings, second tab.", "Ah, there we go, bless."),
    ("I've got work at seven tomorrow.", "Then why are you still here?", "Great question."),
    ("Somebody's breathing really loud.", "Sorry, that's me, I've got a cold.", "Get well soon, mute please."),
    ("What's the plan here?", "There's no plan.", "Good, I love improvising."),
    ("Do we have a medic?", "I'll do it.", "You healed me once last game."),
    ("My dog's barking at the postman again.", "At this time of night?", "He's confused, like me."),
    ("Anyone watching the new season?", "Two episodes in.", "No spoilers, I'm behind."),
    ("Is your stream lagging or is it mine?", "Yours, I think.", "Typical."),
    ("I'm so bad tonight.", "You're fine.", "No, he's right, he's awful.", "Thanks a lot."),
    ("What's everyone drinking?", "Squash.", "Living on the edge.", "Hot chocolate, actually."),
    ("Can somebody explain the new patch?", "They nerfed everything fun.", "So nothing's changed."),
    ("Hold on, my nan's ringing.", "Say hi from us.", "She says hi and go to bed."),
)
