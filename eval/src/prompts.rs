//! The evaluation's prompt sets, written for this project.

/// Open-ended prompts for the diversity lens and the logit capture: short creative
/// requests where many continuations are good ones.
pub const OPEN_ENDED: [&str; 24] = [
    "Describe a market in a city that does not exist.",
    "Write the opening line of a story about a lighthouse keeper.",
    "Invent a new holiday and explain how people celebrate it.",
    "Describe the taste of a fruit nobody has eaten before.",
    "Write a short poem about rain on a tin roof.",
    "Give a name and a one-sentence description to a new constellation.",
    "Describe a room in a house at the bottom of the sea.",
    "Write a letter from a cat to its owner.",
    "Invent a board game and explain its main rule.",
    "Describe a morning in a village in the mountains.",
    "Tell me about an unusual job in the year 3000.",
    "Write a haiku about an old bicycle.",
    "Describe the sound of a forest at night.",
    "Invent a musical instrument and describe how it is played.",
    "Write the first paragraph of a fairy tale about a clockmaker.",
    "Describe a robot who loves gardening.",
    "Suggest a name for a bakery and describe its best pastry.",
    "Describe a journey across a desert on a strange animal.",
    "Write a short dialogue between the sun and the moon.",
    "Describe a library where the books can talk.",
    "Invent a sport played on ice and explain how to win.",
    "Describe the view from a window on a train in winter.",
    "Write a toast for the wedding of two dragons.",
    "Describe a festival of lanterns on a river.",
];

/// More open-ended prompts of the same kind, never captured: the online confirmation
/// (`eval confirm`) samples [`OPEN_ENDED`] and then these, so half of its prompts are
/// held out from the logits its temperatures were matched on.
pub const OPEN_ENDED_MORE: [&str; 24] = [
    "Describe a city built on the back of a giant turtle.",
    "Write the opening line of a story about a forgotten key.",
    "Invent a new color and describe what it looks like.",
    "Describe the smell of a bookshop after the rain.",
    "Write a short poem about a kettle coming to the boil.",
    "Give a name and a one-sentence description to a new island.",
    "Describe a garden that grows only at night.",
    "Write a letter from a tree to the wind.",
    "Invent a card game and explain how a round ends.",
    "Describe an evening in a harbour town in autumn.",
    "Tell me about a strange museum in a small town.",
    "Write a haiku about a paper boat.",
    "Describe the sound of a city waking up.",
    "Invent a kitchen tool and describe what it does.",
    "Write the first paragraph of a legend about a bridge.",
    "Describe a dragon who collects teacups.",
    "Suggest a name for a café on the moon and describe its menu.",
    "Describe a voyage on a ship made of glass.",
    "Write a short dialogue between a river and a mountain.",
    "Describe a school where the lessons are taught by birds.",
    "Invent a dance and explain its first steps.",
    "Describe the view from the top of a very old clock tower.",
    "Write a speech for the opening of a museum of lost socks.",
    "Describe a market held once a year under the snow.",
];

/// The first `n` open-ended prompts: [`OPEN_ENDED`], then [`OPEN_ENDED_MORE`] (at most
/// 48).
pub fn open_ended(n: usize) -> Vec<&'static str> {
    OPEN_ENDED
        .iter()
        .chain(OPEN_ENDED_MORE.iter())
        .copied()
        .take(n)
        .collect()
}

/// The first `n` prompts the offline screening never saw ([`OPEN_ENDED_MORE`]; the
/// capture, hence the selection, uses [`OPEN_ENDED`]): the confirmation half of the
/// cross-judged evaluation (at most 24).
pub fn held_out(n: usize) -> Vec<&'static str> {
    OPEN_ENDED_MORE.iter().copied().take(n).collect()
}

/// The decisive evaluation's kinds of request (docs/EVALUATION.md, "The decisive
/// evaluation"): each is completed with a subject from [`DECISIVE_SUBJECTS`] or
/// [`CALIBRATION_SUBJECTS`].
pub const DECISIVE_KINDS: [&str; 8] = [
    "Write a short story about {}.",
    "Describe {} to someone who has never seen it.",
    "Explain why {} matters to the people who live with it.",
    "Write a poem about {}.",
    "Give advice to someone who is about to encounter {} for the first time.",
    "Write a letter to a friend about {}.",
    "Imagine that {} had never existed. What would be different?",
    "Write the opening of a news report about {}.",
];

/// The subjects of the decisive evaluation's main prompts; none is the subject of a
/// prompt in the older sets.
pub const DECISIVE_SUBJECTS: [&str; 32] = [
    "a night ferry between two islands",
    "a beekeeper's first harvest",
    "an abandoned observatory",
    "a street market at dawn",
    "a glassblower's workshop",
    "a flood in a small river town",
    "a chess tournament in a park",
    "the last tram of the night",
    "a mountain hut in a snowstorm",
    "a family recipe for bread",
    "a power cut in a big city",
    "a violin that has been repaired many times",
    "a migrating flock of cranes",
    "a tailor who works only at night",
    "a volcanic island being born",
    "a school on a boat",
    "a map drawn by a child",
    "the first day at a new job in a paper mill",
    "an orchard after a late frost",
    "a radio station that plays only silence",
    "a ship's cat",
    "a village that shares one telephone",
    "a museum of forgotten inventions",
    "a drought in a farming valley",
    "a hot-air balloon race",
    "a stone bridge that is a thousand years old",
    "a translator at a peace conference",
    "a greenhouse on the moon",
    "a night shift at a bakery",
    "a river that changes its course",
    "a letter found inside a wall",
    "a choir that sings in an empty cathedral",
];

/// The subjects of the decisive evaluation's calibration prompts (entropy matching
/// only; never in the main set).
pub const CALIBRATION_SUBJECTS: [&str; 3] = [
    "a lost dog finding its way home",
    "a windmill on a hill",
    "an old typewriter",
];

/// Every kind of request completed with every subject, kind by kind.
fn completed(subjects: &[&str]) -> Vec<String> {
    DECISIVE_KINDS
        .iter()
        .flat_map(|k| subjects.iter().map(move |s| k.replace("{}", s)))
        .collect()
}

/// The decisive evaluation's 256 main prompts.
pub fn decisive_main() -> Vec<String> {
    completed(&DECISIVE_SUBJECTS)
}

/// The decisive evaluation's 24 calibration prompts.
pub fn decisive_calibration() -> Vec<String> {
    completed(&CALIBRATION_SUBJECTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decisive_sets_are_distinct_and_disjoint_from_the_older_ones() {
        let (main, calibration) = (decisive_main(), decisive_calibration());
        assert_eq!((main.len(), calibration.len()), (256, 24));
        let mut all: Vec<&str> = main
            .iter()
            .chain(&calibration)
            .map(|s| s.as_str())
            .collect();
        all.extend(OPEN_ENDED.iter().chain(OPEN_ENDED_MORE.iter()));
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "a prompt appears twice");
        assert!(main.iter().chain(&calibration).all(|p| !p.contains("{}")));
        // No subject of the new sets is a subject of the older ones.
        for s in DECISIVE_SUBJECTS.iter().chain(&CALIBRATION_SUBJECTS) {
            let head = s.split(' ').skip(1).collect::<Vec<_>>().join(" ");
            for old in OPEN_ENDED.iter().chain(OPEN_ENDED_MORE.iter()) {
                assert!(!old.contains(&head), "{s:?} is in {old:?}");
            }
        }
    }
}
