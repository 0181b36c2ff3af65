/**
 * Turns a growing list of token ids into exact text deltas.
 *
 * Each step decodes a short window that starts one emitted token back, so decoders that treat the
 * first token specially (SentencePiece strips its leading space) stay consistent, and holds the
 * delta back while the window ends in U+FFFD: the bytes of a multi-byte character can arrive over
 * several tokens and must never be split between deltas.
 */
export class IncrementalDetokenizer {
  private readonly ids: number[] = [];
  private prefixOffset = 0;
  private readOffset = 0;

  constructor(private readonly decode: (ids: number[]) => string) {}

  push(id: number): string {
    this.ids.push(id);
    const text = this.decode(this.ids.slice(this.prefixOffset));
    return text.endsWith('\uFFFD') ? '' : this.advance(text);
  }

  /** Whatever was held back, incomplete characters included; call once at the end. */
  flush(): string {
    if (this.readOffset === this.ids.length) return '';
    return this.advance(this.decode(this.ids.slice(this.prefixOffset)));
  }

  private advance(windowText: string): string {
    const delta = windowText.slice(this.decode(this.ids.slice(this.prefixOffset, this.readOffset)).length);
    this.prefixOffset = this.readOffset;
    this.readOffset = this.ids.length;
    return delta;
  }
}
