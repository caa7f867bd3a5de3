package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// The conformance corpus: strings generated deterministically from a
// fixed seed, mixing the scripts and shapes of text that tokenizers
// get wrong: English, code, CJK, emoji, RTL, numbers, runs of white
// space, control characters, special tokens and look-alikes, and
// invalid UTF-8 turned into U+FFFD.

var (
	corpusEnglish = strings.Fields(`the quick brown fox jumps over lazy dog Hello world
		It's I'm we'll they've you'd she's DON'T CAN'T Won't o'clock rock'n'roll
		tokenizer encoding decoding model prompt router request latency throughput
		a an of to in is was for on that with as by at from or be this are
		Caddy reverse proxy HTTPS certificate JSON YAML GPU CUDA NVSHMEM MLC LLM
		naïve café résumé coöperate façade jalapeño Zürich São Paulo Ærøskøbing
		Straße ĲSSELMEER İstanbul ǅemal ﬁnance ﬀ`)
	corpusCode = []string{
		"func main() {\n\tfmt.Println(\"hello, 世界\")\n}\n",
		"def f(x):\n    return x ** 2  # square\n\n\nprint(f(3))",
		"if (a && b || !c) { return a->b[0]; } // done",
		"{\"model\": \"llama-3\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 128}",
		"SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
		"<div class=\"x\">&amp;&lt;&gt;</div>\r\n<br/>",
		"x := []int{1, 2, 3}; for i, v := range x { _ = i + v }",
		"#include <stdio.h>\nint main(void){printf(\"%d\\n\", 42);}",
		"    indented four\n\t\ttabbed two\n        eight spaces",
		"a=1;b=2;c=a+b;d=c*c/2-1%3^4|5&6~7",
		"https://example.com/path?q=1&r=%20x#frag",
		"$ ls -la | grep -v '^d' > out.txt 2>&1",
		"λx.λy.x y → ∀x∈ℝ: x² ≥ 0 ∧ ∑ᵢ aᵢ ≠ ∞",
		"```go\nvar s = `raw\nstring`\n```",
	}
	corpusCJK = []string{
		"你好，世界！", "我们今天去公园散步。", "中华人民共和国成立于1949年。",
		"日本語のテキストです。", "カタカナとひらがなを混ぜる", "東京タワーは333メートル",
		"한국어 문장입니다.", "안녕하세요 여러분", "漢字、かな、한글 mixed",
		"𠀀𠀁𪚥𩸽", "「引用」『二重』【括弧】", "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ１２３",
	}
	corpusEmoji = []string{
		"😀", "🤗", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷🇯🇵", "❤️", "✨🔥💯", "🧑🏿‍💻",
		"1️⃣", "☃", "⌚", "🫠🫡", "😀😃😄😁",
	}
	corpusRTL = []string{
		"مرحبا بالعالم", "السلام عليكم ورحمة الله", "العدد ١٢٣٤٥ والرقم 678",
		"שלום עולם", "עברית עם ניקוד: בְּרֵאשִׁית", "mixed עברית and English",
		"\u202Eright-to-left override\u202C", "فارسی: سلام دنیا",
	}
	corpusOther = []string{
		"Ελληνικά γράμματα", "Русский текст, ёжик.", "हिन्दी पाठ", "ภาษาไทย",
		"Tiếng Việt có dấu", "ქართული", "Հայերեն", "አማርኛ", "e\u0301 vs é", "A\u030A vs Å",
		"\u1100\u1161\u11A8", "ﬁ ﬂ ﬃ", "Ⅻ ⅷ ½ ¾ ² ³", "x\u200By\u200Cz\u200Dw", "no\u00A0break",
		"ideographic\u3000space", "line\u2028sep\u2029para", "nel\u0085here", "soft\u00ADhyphen",
		"\uFFFD", "tab\tsep\tvalues", "ǲ ǳ Ǳ", "ſ ẞ ß", "K Å Ω", "'ſ 's 'S",
		"ΟΔΟΣ ΟΔΥΣΣΕΥΣ. Σ ΑΣ'Σ ΣΑΣ\u0301Σ",
	}
	corpusNumbers = []string{
		"0", "7", "42", "123", "1234", "12345", "123456789012345678901234567890",
		"3.14159", "-0.001", "1e10", "1,234,567.89", "2026-11-29T18:30:00Z", "v1.2.3",
		"0xDEADBEEF", "١٢٣٤", "٣.١٤", "१२३४", "①②③", "12:30pm", "+1 (555) 010-9999",
	}
	corpusSpace = []string{
		"", " ", "  ", "\n", "\n\n", "\n\n  \t", "\t", " \t \n ", "\r\n", "\r\n\r\n",
		"   leading", "trailing   ", "a  b   c    d", "a\n\nb", "x \n y", "end\n",
		"\n\n\n\n\n\n\n\n\n\n", strings.Repeat(" ", 40), strings.Repeat("\t", 9) + "x",
		" \u00A0 \u3000 ", "word\v\fword", "\n \n \n",
	}
	corpusControl = []string{
		"\x00", "a\x00b", "\x01\x02\x03", "\x1b[31mred\x1b[0m", "bell\x07", "\x7f",
		"\x08back", "form\x0cfeed", "\x1c\x1d\x1e\x1f", "vertical\x0btab",
	}
	corpusSpecial = []string{
		"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
		"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>",
		"<|begin_of_text|", "<|begin_of_text", "begin_of_text|>", "< |begin_of_text|>", "<|BEGIN_OF_TEXT|>",
		"<|im_start", "<|im_start|", "im_start|>", "<<|im_start|>|>", "<|im_start|><|im_start|>",
		"<||>", "<|>", "<|", "|>", "<|reserved_special_token_0|>", "<|reserved_special_token_250|>",
		"<think>\nreasoning\n</think>\n\nanswer", "<tool_call>{\"name\": \"f\"}</tool_call>", "</s>", "<s>", "<unk>",
		"text<|im_end|>more", " <|im_start|> ", "\n<|eot_id|>\n", "<|fim_prefix|>a<|fim_middle|>b<|fim_suffix|>",
		"<|python_tag|>", "<|finetune_right_pad_id|>", "<|image_pad|><|vision_start|>",
	}
)

// corpusCategories lists the fragment pools the mixer draws from.
var corpusCategories = [][]string{
	corpusEnglish, corpusCode, corpusCJK, corpusEmoji, corpusRTL, corpusOther,
	corpusNumbers, corpusSpace, corpusControl, corpusSpecial,
}

// conformanceCorpus returns n strings (n >= the number of fixed ones):
// every fixed fragment on its own, then seeded random mixtures.
func conformanceCorpus(n int) []string {
	var out []string
	for _, cat := range corpusCategories {
		out = append(out, cat...)
	}
	out = append(out, strings.Join(corpusEnglish, " "))
	rng := rand.New(rand.NewPCG(20261129, 6))
	for len(out) < n {
		out = append(out, randomText(rng))
	}
	return out
}

// randomText builds one mixed string.
func randomText(rng *rand.Rand) string {
	var sb strings.Builder
	parts := 1 + rng.IntN(12)
	for range parts {
		switch k := rng.IntN(16); {
		case k < 10:
			cat := corpusCategories[k]
			sb.WriteString(cat[rng.IntN(len(cat))])
		case k == 10:
			sb.WriteString(randomSpace(rng))
		case k == 11:
			sb.WriteString(randomRunes(rng))
		case k == 12:
			// Invalid UTF-8, read the way Go reads it: U+FFFD per bad byte.
			b := make([]byte, 1+rng.IntN(6))
			for i := range b {
				b[i] = byte(0x80 + rng.IntN(0x80))
			}
			if rng.IntN(2) == 0 {
				b = append([]byte("ok"), b...)
			}
			sb.WriteString(string([]rune(string(b))))
		case k == 13:
			fmt.Fprintf(&sb, "%d", rng.Int64N(1<<uint(1+rng.IntN(62))))
		case k == 14:
			w := corpusEnglish[rng.IntN(len(corpusEnglish))]
			if rng.IntN(2) == 0 {
				w = strings.ToUpper(w)
			}
			sb.WriteString(w + "'" + []string{"s", "t", "re", "ve", "m", "ll", "d", "S", "LL", "x"}[rng.IntN(10)])
		default:
			sb.WriteString(strings.Repeat(corpusEnglish[rng.IntN(len(corpusEnglish))], 1+rng.IntN(5)))
		}
		if rng.IntN(3) > 0 {
			sb.WriteByte(' ')
		}
	}
	return sb.String()
}

// randomSpace returns a run of assorted white space.
func randomSpace(rng *rand.Rand) string {
	ws := []string{" ", " ", " ", "\n", "\t", "\r", "\r\n", "\u00A0", "\u3000", "\u2003"}
	var sb strings.Builder
	for range 1 + rng.IntN(8) {
		sb.WriteString(ws[rng.IntN(len(ws))])
	}
	return sb.String()
}

// randomRunes returns random code points from assorted blocks.
func randomRunes(rng *rand.Rand) string {
	blocks := [][2]rune{
		{0x20, 0x7E}, {0xA0, 0x24F}, {0x370, 0x3FF}, {0x400, 0x4FF}, {0x590, 0x6FF},
		{0x900, 0x97F}, {0x3040, 0x30FF}, {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3},
		{0x1F300, 0x1F64F}, {0x2000, 0x206F}, {0xFF00, 0xFFEF},
	}
	var sb strings.Builder
	for range 1 + rng.IntN(10) {
		b := blocks[rng.IntN(len(blocks))]
		r := b[0] + rng.Int32N(b[1]-b[0]+1)
		sb.WriteRune(r)
	}
	return sb.String()
}
