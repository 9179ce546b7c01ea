// parseAnswer is JSON.parse for the service's answers and frames, which also
// keeps each job body as it came: every object that has a "body" member gets
// a "raw_body" member holding that member's JSON text, byte for byte. The
// service answers bodies as they were pushed (whitespace, key order and
// number spellings kept), which JSON.parse alone would lose.
export function parseAnswer(text: string): unknown {
  const p = new Parser(text);
  p.space();
  const v = p.value();
  p.space();
  if (p.i !== text.length) {
    p.fail("trailing data");
  }
  return v;
}

class Parser {
  i = 0;
  constructor(readonly s: string) {}

  fail(why: string): never {
    throw new SyntaxError(`delayq: invalid JSON answer at offset ${this.i}: ${why}`);
  }

  space(): void {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) {
        return;
      }
      this.i++;
    }
  }

  value(): unknown {
    const c = this.s[this.i];
    switch (c) {
      case "{":
        return this.object();
      case "[":
        return this.array();
      case '"':
        return this.string();
      case "t":
        return this.word("true", true);
      case "f":
        return this.word("false", false);
      case "n":
        return this.word("null", null);
      default:
        return this.number();
    }
  }

  word<T>(w: string, v: T): T {
    if (!this.s.startsWith(w, this.i)) {
      this.fail(`unexpected ${JSON.stringify(this.s.slice(this.i, this.i + 8))}`);
    }
    this.i += w.length;
    return v;
  }

  number(): number {
    const m = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
    m.lastIndex = this.i;
    const r = m.exec(this.s);
    if (!r) {
      this.fail("want a value");
    }
    this.i += r[0].length;
    return Number(r[0]);
  }

  string(): string {
    const s = this.s;
    const start = this.i;
    let j = start + 1;
    let escaped = false;
    for (; j < s.length; j++) {
      const c = s.charCodeAt(j);
      if (c === 0x5c) {
        escaped = true;
        j++;
      } else if (c === 0x22) {
        break;
      }
    }
    if (j >= s.length) {
      this.fail("unterminated string");
    }
    this.i = j + 1;
    return escaped ? (JSON.parse(s.slice(start, j + 1)) as string) : s.slice(start + 1, j);
  }

  array(): unknown[] {
    this.i++;
    const out: unknown[] = [];
    this.space();
    if (this.s[this.i] === "]") {
      this.i++;
      return out;
    }
    for (;;) {
      this.space();
      out.push(this.value());
      this.space();
      const c = this.s[this.i++];
      if (c === "]") {
        return out;
      }
      if (c !== ",") {
        this.i--;
        this.fail("want , or ]");
      }
    }
  }

  object(): Record<string, unknown> {
    this.i++;
    const out: Record<string, unknown> = {};
    this.space();
    if (this.s[this.i] === "}") {
      this.i++;
      return out;
    }
    for (;;) {
      this.space();
      if (this.s[this.i] !== '"') {
        this.fail("want a member name");
      }
      const k = this.string();
      this.space();
      if (this.s[this.i++] !== ":") {
        this.i--;
        this.fail("want :");
      }
      this.space();
      const start = this.i;
      const v = this.value();
      Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
      if (k === "body") {
        out.raw_body = this.s.slice(start, this.i);
      }
      this.space();
      const c = this.s[this.i++];
      if (c === "}") {
        return out;
      }
      if (c !== ",") {
        this.i--;
        this.fail("want , or }");
      }
    }
  }
}
