//! The ciphertext-only attack on the scrambler (docs/SCRAMBLER.md, "Security"): from one
//! contiguous scrambled run alone (no key, no known plaintext, none of the bytes before it),
//! recover its plaintext. For tests and `psp-mp analyze` (testbed/multipath.sh); not for
//! production use.
//!
//! The scrambler's recurrence `b[i] = B[i] ^ B[i-1] ^ b[i-65]` holds inside any run. So with
//! `D[i] = B[i] ^ B[i-1]` every plaintext byte is `b[i] = c[i mod 65] ^ K[i]`, where `K[i] = D[i] ^
//! D[i-65] ^ ...` is known and `c[0..65]` (the run's first 65 plaintext bytes) is not: one unknown
//! byte per residue class mod 65, each seen `len / 65` times (252 times in a 16 KiB segment).
//! For each class the attack scores the 256 candidates by a byte-frequency [`Model`] of the
//! data (printable text, or decimal digits), keeps the best 16, and then chooses one per class
//! jointly by adding a bigram score over neighbouring bytes (each class's bytes sit next to the
//! previous and the next class's; the 65 classes form a cycle) with an exact Viterbi pass. The
//! text model's bigrams are learnt from its own first decoding (no corpus); the digits model's
//! are "the next digit follows" (what iperf sends). Every model runs and the likeliest result
//! per byte wins.
//!
//! What it cannot do: a run of random or sealed bytes (AES-GCM) gives 256 equally poor
//! candidates per class, so it recovers about 1/256 of the bytes, by chance.

/// The recurrence's lag: bytes `i` and `i - 65` share an unknown.
pub const LAG: usize = 65;
/// Candidates per class kept for the joint (bigram) choice.
const KEEP: usize = 16;
/// Rounds of "learn bigrams from the last decoding, decode again" for the text model.
const ROUNDS: usize = 2;

/// What the plaintext is assumed to look like.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// Printable text: English letter frequencies, spaces, newlines, punctuation, some digits.
    Text,
    /// Decimal digits, mostly counting up (iperf's "0123456789" payload, counters).
    Digits,
}

impl Model {
    /// Every model, in the order tried.
    pub const ALL: &'static [Self] = &[Self::Text, Self::Digits];

    /// A short name (`text`, `digits`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Digits => "digits",
        }
    }

    /// Unnormalized byte weights.
    fn weights(self) -> [f64; 256] {
        let mut w = [0.0f64; 256];
        for (b, x) in (0..=255u8).zip(w.iter_mut()) {
            *x = match b {
                0x20..=0x7e => 0.1,
                b'\n' | b'\t' | b'\r' => 0.3,
                _ => 0.005,
            };
        }
        match self {
            Self::Text => {
                const LETTERS: [(u8, f64); 26] = [
                    (b'e', 95.0),
                    (b't', 68.0),
                    (b'a', 62.0),
                    (b'o', 60.0),
                    (b'i', 57.0),
                    (b'n', 56.0),
                    (b's', 50.0),
                    (b'r', 48.0),
                    (b'h', 40.0),
                    (b'l', 32.0),
                    (b'd', 30.0),
                    (b'c', 25.0),
                    (b'u', 22.0),
                    (b'm', 20.0),
                    (b'f', 18.0),
                    (b'p', 17.0),
                    (b'g', 15.0),
                    (b'w', 14.0),
                    (b'y', 13.0),
                    (b'b', 11.0),
                    (b'v', 8.0),
                    (b'k', 6.0),
                    (b'x', 2.0),
                    (b'j', 1.5),
                    (b'q', 1.0),
                    (b'z', 1.0),
                ];
                for (c, f) in LETTERS {
                    w[usize::from(c)] = f;
                    w[usize::from(c.to_ascii_uppercase())] = f * 0.12;
                }
                for d in b'0'..=b'9' {
                    w[usize::from(d)] = 2.0;
                }
                for (c, f) in [
                    (b' ', 150.0),
                    (b'\n', 15.0),
                    (b'.', 8.0),
                    (b',', 8.0),
                    (b'-', 3.0),
                    (b'\'', 2.0),
                    (b'"', 2.0),
                    (b':', 2.0),
                    (b'`', 2.0),
                    (b';', 1.0),
                    (b'(', 1.5),
                    (b')', 1.5),
                    (b'/', 1.0),
                    (b'_', 1.0),
                    (b'|', 1.0),
                    (b'?', 0.5),
                    (b'#', 0.5),
                    (b'*', 0.5),
                    (b'=', 0.5),
                    (b'[', 0.5),
                    (b']', 0.5),
                ] {
                    w[usize::from(c)] = f;
                }
            }
            Self::Digits => {
                for (b, x) in w.iter_mut().enumerate() {
                    *x *= 0.01;
                    if (usize::from(b'0')..=usize::from(b'9')).contains(&b) {
                        *x = 90.0;
                    }
                }
                for (c, f) in [(b' ', 10.0), (b'\n', 5.0), (b'.', 3.0), (b',', 2.0)] {
                    w[usize::from(c)] = f;
                }
            }
        }
        w
    }

    /// Natural-log probabilities of single bytes.
    fn unigram(self) -> Box<[f32; 256]> {
        let w = self.weights();
        let total: f64 = w.iter().sum();
        let mut out = Box::new([0f32; 256]);
        for (o, x) in out.iter_mut().zip(w) {
            *o = (x / total).ln() as f32;
        }
        out
    }

    /// The model's own bigram prior `ln P(y | x)`, if it has one (digits: counting up).
    fn bigram_prior(self, uni: &[f32; 256]) -> Option<Bigram> {
        match self {
            Self::Text => None,
            Self::Digits => {
                let mut t = Bigram::zeroed();
                for x in 0..=255u8 {
                    for (y, &ln_p) in (0..=255u8).zip(uni.iter()) {
                        let p = f64::from(ln_p).exp();
                        let next = x.is_ascii_digit() && y == b'0' + (x - b'0' + 1) % 10;
                        let v = if next { 0.5 + 0.5 * p } else { 0.5 * p };
                        t.set(usize::from(x), usize::from(y), v.ln());
                    }
                }
                Some(t)
            }
        }
    }
}

/// A 256 × 256 table of `ln P(y | x)`.
struct Bigram(Vec<f32>);

impl Bigram {
    fn zeroed() -> Self {
        Self(vec![0.0; 256 * 256])
    }

    fn get(&self, x: u8, y: u8) -> f32 {
        self.0[usize::from(x) << 8 | usize::from(y)]
    }

    fn set(&mut self, x: usize, y: usize, v: f64) {
        self.0[x << 8 | y] = v as f32;
    }

    /// Learnt from `text`, smoothed towards the unigram `uni` (20 pseudo-counts per row).
    fn learn(text: &[u8], uni: &[f32; 256]) -> Self {
        const PRIOR: f64 = 20.0;
        let mut counts = vec![0u32; 256 * 256];
        let mut rows = [0u32; 256];
        for w in text.windows(2) {
            counts[usize::from(w[0]) << 8 | usize::from(w[1])] += 1;
            rows[usize::from(w[0])] += 1;
        }
        let mut t = Self::zeroed();
        for (x, &row) in rows.iter().enumerate() {
            for (y, &ln_p) in uni.iter().enumerate() {
                let p = f64::from(ln_p).exp();
                let v = (f64::from(counts[x << 8 | y]) + PRIOR * p) / (f64::from(row) + PRIOR);
                t.set(x, y, v.ln());
            }
        }
        t
    }
}

/// The result of the attack on one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Recovery {
    /// The guessed plaintext, as long as the run.
    pub plaintext: Vec<u8>,
    /// The model that explained the run best.
    pub model: Model,
    /// Mean natural-log probability per byte of `plaintext` under that model's byte
    /// frequencies (higher is likelier; about -2.9 for English text).
    pub score: f64,
}

/// Recovers a scrambled run with every [`Model`]; the likeliest result.
pub fn recover(run: &[u8]) -> Recovery {
    let mut best: Option<Recovery> = None;
    for &m in Model::ALL {
        let r = recover_with(run, m);
        if best.as_ref().is_none_or(|b| r.score > b.score) {
            best = Some(r);
        }
    }
    best.unwrap_or(Recovery {
        plaintext: Vec::new(),
        model: Model::Text,
        score: 0.0,
    })
}

/// Recovers a scrambled run assuming `model`.
pub fn recover_with(run: &[u8], model: Model) -> Recovery {
    let n = run.len();
    let uni = model.unigram();
    if n == 0 {
        return Recovery {
            plaintext: Vec::new(),
            model,
            score: 0.0,
        };
    }
    // K[i]: the known part of b[i] = c[i mod 65] ^ K[i].
    let mut k = vec![0u8; n];
    for i in LAG..n {
        k[i] = k[i - LAG] ^ run[i] ^ run[i - 1];
    }
    let classes = LAG.min(n);
    // Per class: how often each K value occurs, then the unigram score of each candidate.
    let mut node = vec![[0f32; 256]; classes];
    for (r, scores) in node.iter_mut().enumerate() {
        let mut hist = [0u32; 256];
        for i in (r..n).step_by(LAG) {
            hist[usize::from(k[i])] += 1;
        }
        for (c, s) in scores.iter_mut().enumerate() {
            *s = hist
                .iter()
                .enumerate()
                .filter(|(_, h)| **h != 0)
                .map(|(v, h)| *h as f32 * uni[c ^ v])
                .sum();
        }
    }
    let cands: Vec<Vec<u8>> = node
        .iter()
        .map(|scores| {
            let mut idx: Vec<u8> = (0..=255).collect();
            idx.sort_by(|a, b| scores[usize::from(*b)].total_cmp(&scores[usize::from(*a)]));
            idx.truncate(KEEP);
            idx
        })
        .collect();
    let decode =
        |choice: &[u8]| -> Vec<u8> { (0..n).map(|i| choice[i % LAG] ^ k[i]).collect::<Vec<u8>>() };
    let mut choice: Vec<u8> = cands.iter().map(|c| c[0]).collect();
    if classes == LAG && n > LAG {
        let prior = model.bigram_prior(&uni);
        let rounds = if prior.is_some() { 1 } else { ROUNDS };
        for _ in 0..rounds {
            let learnt;
            let bigram = match &prior {
                Some(b) => b,
                None => {
                    learnt = Bigram::learn(&decode(&choice), &uni);
                    &learnt
                }
            };
            choice = viterbi(&k, &node, &cands, bigram);
        }
    }
    let plaintext = decode(&choice);
    let score = plaintext
        .iter()
        .map(|&b| f64::from(uni[usize::from(b)]))
        .sum::<f64>()
        / n as f64;
    Recovery {
        plaintext,
        model,
        score,
    }
}

/// The best candidate per class for unigram plus bigram scores over the cycle of 65 classes
/// (class `r`'s bytes are followed by class `r + 1`'s, class 64's by class 0's).
fn viterbi(k: &[u8], node: &[[f32; 256]], cands: &[Vec<u8>], bigram: &Bigram) -> Vec<u8> {
    let n = k.len();
    // edge[r][i][j]: bigram score of class r's candidate i followed by class r+1's candidate j.
    let edges: Vec<Vec<[f32; KEEP]>> = (0..LAG)
        .map(|r| {
            let next = (r + 1) % LAG;
            cands[r]
                .iter()
                .map(|&ci| {
                    let mut row = [f32::NEG_INFINITY; KEEP];
                    for (j, &cj) in cands[next].iter().enumerate() {
                        row[j] = (r..n - 1)
                            .step_by(LAG)
                            .map(|i| bigram.get(ci ^ k[i], cj ^ k[i + 1]))
                            .sum();
                    }
                    row
                })
                .collect()
        })
        .collect();
    let unary = |r: usize, i: usize| node[r][usize::from(cands[r][i])];
    let mut best = (f32::NEG_INFINITY, vec![0usize; LAG]);
    for s in 0..cands[0].len() {
        // score[j]: the best path from class 0 = s to class r = j; back[r][j] its predecessor.
        let mut score = [f32::NEG_INFINITY; KEEP];
        score[s] = unary(0, s);
        let mut back = vec![[0usize; KEEP]; LAG];
        for r in 1..LAG {
            let prev = score;
            for j in 0..cands[r].len() {
                let (arg, v) = (0..cands[r - 1].len())
                    .map(|i| (i, prev[i] + edges[r - 1][i][j]))
                    .fold((0, f32::NEG_INFINITY), |a, b| if b.1 > a.1 { b } else { a });
                score[j] = v + unary(r, j);
                back[r][j] = arg;
            }
        }
        for j in 0..cands[LAG - 1].len() {
            let total = score[j] + edges[LAG - 1][j][s];
            if total > best.0 {
                let mut path = vec![0usize; LAG];
                path[LAG - 1] = j;
                for r in (1..LAG).rev() {
                    path[r - 1] = back[r][path[r]];
                }
                path[0] = s;
                best = (total, path);
            }
        }
    }
    best.1
        .iter()
        .enumerate()
        .map(|(r, &i)| cands[r][i])
        .collect()
}

#[cfg(test)]
mod tests {
    use psp_core::SuiteKey;
    use psp_core::crypto::SuiteId;
    use psp_core::scramble::{Scrambler, Seed};

    use super::*;

    /// A docs text of this repository (not the source of any model: the text model has no
    /// corpus).
    const DOC: &str = include_str!("../../../../docs/PROTOCOL.md");
    const RUN: usize = 16 * 1024;

    fn scrambled(plain: &[u8]) -> Vec<u8> {
        let mut s = Scrambler::new(&Seed::from_key(b"a key the attacker never sees"));
        let mut out = plain.to_vec();
        s.scramble_in_place(&mut out);
        out
    }

    fn same(a: &[u8], b: &[u8]) -> usize {
        a.iter().zip(b).filter(|(x, y)| x == y).count()
    }

    /// Attacks the 16 KiB run at `offset` of `plain` scrambled: at least 95 % must come back,
    /// explained best by `model`.
    fn assert_recovers(plain: &[u8], offset: usize, model: Model) {
        assert!(plain.len() >= offset + RUN, "the plaintext is too short");
        let run = &scrambled(plain)[offset..offset + RUN];
        let r = recover(run);
        let got = same(&r.plaintext, &plain[offset..offset + RUN]);
        assert!(got * 100 >= RUN * 95, "{got} of {RUN} ({:?})", r.model);
        assert_eq!(r.model, model);
    }

    /// One 16 KiB run from the middle of a scrambled docs text, nothing else known:
    /// at least 95 % comes back.
    #[test]
    fn recovers_a_text_run_from_the_ciphertext_alone() {
        assert_recovers(DOC.as_bytes(), 3000, Model::Text);
    }

    /// The iperf-style digit stream (Figs 13/14): the digits model wins and reads it.
    #[test]
    fn recovers_a_digit_stream() {
        let plain: Vec<u8> = b"0123456789"
            .iter()
            .copied()
            .cycle()
            .take(100_000)
            .collect();
        assert_recovers(&plain, 40_003, Model::Digits);
    }

    /// The same text sealed with AES-128-GCM (as psp-mp seals a segment): under 1 % comes
    /// back (chance is 1/256).
    #[test]
    fn recovers_nothing_of_an_aes_gcm_run() {
        let plain = &DOC.as_bytes()[3000..3000 + RUN];
        let key = SuiteKey::new(SuiteId::Aes128Gcm, &[7u8; 16]).unwrap();
        let mut sealed = plain.to_vec();
        let mut tag = [0u8; 16];
        key.seal_in_place(9, &[0u8; 32], &mut sealed, &mut tag)
            .unwrap();
        let r = recover(&sealed);
        let got = same(&r.plaintext, plain);
        assert!(got * 100 < RUN, "{got} of {RUN}");
    }
}
