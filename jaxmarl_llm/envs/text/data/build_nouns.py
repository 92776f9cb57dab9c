# Source of data/nouns.tsv and data/questions.tsv: semantic attributes written by hand, spelling ones computed.
# Regenerate with: python build_nouns.py <this folder>  (checks that every word has a distinct answer vector).
import collections
Q = [
 ("animal","Is it an animal?"),("mammal","Is it a mammal?"),("bird","Is it a bird?"),("insect","Is it an insect or a spider?"),
 ("water","Does it live mainly in water?"),("fly","Can it fly?"),("legs","Does it have legs?"),("fur","Does it have fur?"),
 ("pet","Is it commonly kept as a pet?"),("farm","Is it a farm animal?"),("plant","Is it a plant or part of a plant?"),
 ("food","Is it a food people eat?"),("drink","Is it something people drink?"),("fruit","Is it a fruit?"),("vegetable","Is it a vegetable?"),
 ("sweet","Does it usually taste sweet?"),("underground","Does it grow underground?"),("made","Is it made by people?"),
 ("electric","Does it use electricity?"),("screen","Does it have a screen?"),("vehicle","Is it a vehicle?"),("wheels","Does it have wheels?"),
 ("engine","Does it have an engine?"),("furniture","Is it a piece of furniture?"),("kitchen","Is it usually found in a kitchen?"),
 ("tool","Is it a tool?"),("sharp","Is it sharp?"),("metal","Is it usually made of metal?"),("wood","Is it usually made of wood?"),
 ("wear","Is it worn on the body?"),("body","Is it a part of the human body?"),("place","Is it a building or a place?"),
 ("outdoors","Is it usually found outdoors?"),("nature","Is it a natural thing that is not alive?"),("music","Is it a musical instrument?"),
 ("strings","Does it have strings?"),("blow","Is it played by blowing into it?"),("big","Is it bigger than a car?"),
 ("hand","Is it small enough to hold in one hand?"),("pairs","Does it usually come in pairs?"),("liquid","Is it a liquid?"),
 ("container","Is it used to hold or carry things?"),("paper","Is it made of paper?"),("water_travel","Does it travel on water?"),
 ("cold","Is it cold?"),("hot","Is it hot?"),("head","Is it on the head or face?"),("soft","Is it soft?"),
 ("round","Is it round?"),("write","Is it used for writing or drawing?"),("clean","Is it used for cleaning?"),("sleep","Is it used for sleeping?"),
]
SPELL = [("starts_a_m","Does the word start with a letter from A to M?", lambda w: w[0] <= "m"),
         ("long","Does the word have more than 5 letters?", lambda w: len(w) > 5),
         ("has_e","Does the word contain the letter E?", lambda w: "e" in w),
         ("has_a","Does the word contain the letter A?", lambda w: "a" in w),
         ("has_o","Does the word contain the letter O?", lambda w: "o" in w),
         ("has_r","Does the word contain the letter R?", lambda w: "r" in w),
         ("has_t","Does the word contain the letter T?", lambda w: "t" in w),
         ("has_s","Does the word contain the letter S?", lambda w: "s" in w)]
C = {
 "mammal": "animal mammal legs outdoors",
 "bird": "animal bird legs fly outdoors",
 "sea": "animal water outdoors",
 "bug": "animal insect legs outdoors hand",
 "reptile": "animal legs outdoors",
 "fruit": "plant food fruit sweet hand",
 "vegetable": "plant food vegetable hand",
 "food": "food made",
 "drink": "drink liquid",
 "plant": "plant outdoors",
 "furniture": "furniture made",
 "kitchen": "kitchen made",
 "tool": "tool made",
 "vehicle": "vehicle made outdoors engine wheels",
 "electronic": "electric made",
 "clothing": "wear made",
 "body": "body",
 "place": "place outdoors",
 "nature": "nature outdoors",
 "instrument": "music made",
 "object": "made",
}
W = """
dog mammal: fur pet outdoors-
cat mammal: fur pet outdoors-
horse mammal: fur farm big-
cow mammal: fur farm
elephant mammal: big
lion mammal: fur
mouse mammal: fur hand
rabbit mammal: fur pet soft
bear mammal: fur
monkey mammal: fur
pig mammal: farm
sheep mammal: fur farm soft
goat mammal: fur farm
whale sea: mammal big
dolphin sea: mammal
chicken bird: farm
eagle bird:
owl bird:
penguin bird: fly- cold
parrot bird: pet outdoors-
duck bird: farm
fish sea: pet hand
shark sea: sharp
octopus sea:
crab sea: legs hand
bee bug: fly
ant bug:
butterfly bug: fly
spider bug:
mosquito bug: fly
snake reptile: legs-
frog reptile: hand
turtle reptile: water
crocodile reptile: water sharp
apple fruit: round
banana fruit:
orange fruit: round
grape fruit: round
strawberry fruit:
lemon fruit: sweet-
watermelon fruit: hand- big- round
cherry fruit: round
pineapple fruit: hand-
carrot vegetable: underground
potato vegetable: underground
onion vegetable: underground round
lettuce vegetable: hand-
cabbage vegetable: round hand-
broccoli vegetable:
garlic vegetable: underground
bread food: soft
cheese food:
egg food: made- hand
pizza food: hot round
cake food: sweet soft
rice food: plant made-
soup food: hot liquid
chocolate food: sweet hand
butter food: soft
honey food: sweet made- liquid
cookie food: sweet hand round
water drink: nature
milk drink: cold
coffee drink: hot made plant-
tea drink: hot made
juice drink: sweet cold made
tree plant: big wood
flower plant: hand
grass plant: soft
rose plant: hand
cactus plant: sharp
chair furniture: legs wood
table furniture: legs wood
bed furniture: legs soft sleep
sofa furniture: legs soft
desk furniture: legs wood
shelf furniture: wood container
lamp furniture: electric
mirror furniture:
door object: wood
window object:
cup kitchen: hand container round
plate kitchen: hand round
spoon kitchen: metal hand
fork kitchen: metal hand sharp
knife kitchen: metal hand sharp tool
pot kitchen: metal container
bottle kitchen: hand container
bowl kitchen: hand container round
kettle kitchen: metal electric container hot
hammer tool: metal hand
saw tool: metal sharp
screwdriver tool: metal hand
shovel tool: metal outdoors
ladder tool: outdoors
scissors tool: metal sharp hand
needle tool: metal sharp hand
rope tool: soft
broom tool: clean wood
car vehicle:
bus vehicle: big
bicycle vehicle: engine- metal
train vehicle: big metal
airplane vehicle: big fly metal
boat vehicle: wheels- water_travel
truck vehicle: big
motorcycle vehicle: metal
helicopter vehicle: big fly wheels-
ship vehicle: big wheels- water_travel metal
phone electronic: screen hand
computer electronic: screen
television electronic: screen
radio electronic:
camera electronic: hand
clock electronic: round
refrigerator electronic: kitchen big- cold container
oven electronic: kitchen hot
keyboard electronic:
shirt clothing: soft
shoe clothing: pairs
hat clothing: head soft
sock clothing: pairs soft hand
coat clothing: soft
glove clothing: pairs soft hand
dress clothing: soft
scarf clothing: soft
belt clothing:
ring clothing: metal hand round
hand body: pairs
foot body: pairs legs-
eye body: head pairs round
nose body: head
ear body: head pairs
heart body:
tooth body: head sharp
hair body: head soft
finger body:
house place: big made
school place: big made
hospital place: big made
church place: big made
bridge place: big made
castle place: big made
farm place: big
beach place: nature big
mountain place: nature big cold
river place: nature big water_travel liquid
sun nature: big hot round
moon nature: big round
star nature: big hot
cloud nature: big soft
rain nature: liquid
snow nature: cold soft
rock nature: hand
sand nature: soft
fire nature: hot
ocean nature: big liquid
guitar instrument: strings wood
piano instrument: strings big- wood
drum instrument: round
violin instrument: strings wood
flute instrument: blow hand
trumpet instrument: blow metal
book object: paper hand
pen object: write hand
pencil object: write wood hand
paper object: paper hand write
key object: metal hand
ball object: round hand
doll object: hand soft
umbrella object:
candle object: hot hand
coin object: metal round hand
box object: container
bag object: container soft
wallet object: container hand
watch object: wear hand round
glasses object: wear head
pillow object: soft sleep
blanket object: soft sleep
soap object: clean hand
towel object: soft clean
toothbrush object: clean hand
map object: paper
flag object:
balloon object: round fly hand
kite object: fly outdoors
"""
qnames = [q for q, _ in Q]
rows = []
for line in W.strip().splitlines():
    head, _, rest = line.partition(":")
    word, cat = head.split()
    attrs = set(C[cat].split())
    for t in rest.split():
        if t.endswith("-"): attrs.discard(t[:-1])
        else: attrs.add(t)
    bad = attrs - set(qnames); assert not bad, (word, bad)
    for name, _, f in SPELL:
        if f(word): attrs.add(name)
    rows.append((word, cat, attrs))
words = [r[0] for r in rows]; assert len(set(words)) == len(words)
allq = qnames + [s[0] for s in SPELL]
vec = collections.defaultdict(list)
for w, c, a in rows: vec[tuple(q in a for q in allq)].append(w)
dups = [v for v in vec.values() if len(v) > 1]
print(len(rows), "words", len(allq), "questions; duplicates:", dups)
import sys
out = sys.argv[1]
with open(out + "/nouns.tsv", "w") as f:
    f.write("# word\tcategory\tattributes that are true (names from questions.tsv)\n")
    for w, c, a in rows:
        f.write(f"{w}\t{c}\t{' '.join(q for q in allq if q in a)}\n")
with open(out + "/questions.tsv", "w") as f:
    f.write("# name\tquestion\n")
    for name, text in Q: f.write(f"{name}\t{text}\n")
    for name, text, _ in SPELL: f.write(f"{name}\t{text}\n")
