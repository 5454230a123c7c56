//! Stopword lists, one per purpose and named for it. They differ on
//! purpose: a word that carries no topic ("think") can still be the start
//! of a name, and a recall keyword must be four letters or more anyway.

/// Function words that carry no topic: [`crate::content_words`] drops them
/// (knowledge extraction, full-text query terms, stance and style cues).
pub const CONTENT: &[&str] = &[
    "a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does",
    "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her",
    "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more",
    "most", "my", "myself", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "out", "over", "own",
    "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them", "then", "there", "these",
    "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "think",
    "believe", "really", "always", "never", "not", "no", "dont", "don't", "use", "get", "got", "make", "thing",
    "things", "lot", "way", "much", "many", "yes", "ok", "okay", "let", "lets", "let's", "going", "want", "say",
    "said", "one", "two", "like", "know", "yeah", "oh", "well", "even", "still", "ever", "go",
];

/// Words a topic is never named after (the first 1–4 keywords of a
/// message name a new topic).
pub const TOPIC_NAME: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "because",
    "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing", "don't", "for", "from",
    "get", "got", "had", "has", "have", "having", "he", "her", "here", "him", "his", "how", "i", "i'm", "if", "in",
    "into", "is", "it", "it's", "its", "just", "know", "like", "me", "more", "most", "my", "need", "no", "not", "now",
    "of", "on", "one", "or", "our", "out", "please", "really", "she", "should", "so", "some", "tell", "than", "that",
    "the", "their", "them", "then", "there", "these", "they", "think", "this", "to", "too", "up", "us", "very", "want",
    "was", "we", "were", "what", "when", "where", "which", "while", "who", "why", "will", "with", "would", "you",
    "your", "hey", "hi", "hello", "thanks", "ok", "okay", "yes", "let", "let's", "make", "going", "way", "much",
    "many", "well", "there's",
];

/// Words that end or void a stated name in "call me X" (chalie.md §2.2):
/// pronouns, articles and fillers like "fine" or "later".
pub const NOT_A_NAME: &[&str] = &[
    "a",
    "an",
    "the",
    "i",
    "me",
    "my",
    "we",
    "you",
    "your",
    "he",
    "she",
    "they",
    "it",
    "this",
    "that",
    "here",
    "there",
    "done",
    "fine",
    "good",
    "okay",
    "ok",
    "sure",
    "yes",
    "no",
    "maybe",
    "later",
    "anything",
    "something",
    "nothing",
    "everything",
];

/// Question and filler words of four letters or more that the ACT loop's
/// `recall` skips when it picks a message's keywords.
pub const RECALL_SKIP: &[&str] = &[
    "what", "when", "where", "which", "with", "that", "this", "there", "their", "about", "would", "could", "should",
    "have", "from", "your", "mine", "they", "them", "were", "been", "does", "tell", "know", "just", "like", "some",
    "more", "into", "than", "then", "also", "please", "thanks", "remember", "said",
];
