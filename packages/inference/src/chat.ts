// Chat tokenizers and templates loaded from a Hugging Face model folder.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { InvalidRequestError } from './errors.js';
import type { ChatMessage } from './types.js';

type Json = Record<string, unknown>;

export async function readJson(path: string): Promise<Json> {
  return JSON.parse(await readFile(path, 'utf8')) as Json;
}

/** tokenizer_config.json writes special tokens either as strings or as AddedToken objects. */
function tokenString(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as Json).content === 'string') {
    return (value as Json).content as string;
  }
  return undefined;
}

function idList(value: unknown): number[] {
  if (typeof value === 'number') return [value];
  return Array.isArray(value) ? value.filter((v): v is number => typeof v === 'number') : [];
}

async function loadChatTemplate(dir: string, config: Json): Promise<string> {
  const inline = config.chat_template;
  if (typeof inline === 'string') return inline;
  if (Array.isArray(inline)) {
    const named = (inline as { name?: string; template?: string }[]).find((t) => t.name === 'default');
    if (named?.template) return named.template;
  }
  // Newer exports keep the template in its own file.
  try {
    return await readFile(join(dir, 'chat_template.jinja'), 'utf8');
  } catch {
    throw new Error(`${dir}: tokenizer_config.json has no chat_template and there is no chat_template.jinja`);
  }
}

/** A model's tokenizer and chat template, loaded from a Hugging Face model directory. */
export class ChatTokenizer {
  private constructor(
    private readonly tokenizer: Tokenizer,
    private readonly template: Template,
    private readonly specialTokens: Record<string, string>,
    /** Ids that end a turn: generation_config/config eos ids and the tokenizer's eos_token. */
    readonly stopIds: ReadonlySet<number>,
    /** The text of every special token (`<|im_end|>`...), or null when the tokenizer has none. */
    private readonly markup: RegExp | null,
  ) {}

  static async load(dir: string, config: Json, generationConfig: Json): Promise<ChatTokenizer> {
    const tokenizerConfig = await readJson(join(dir, 'tokenizer_config.json'));
    const tokenizerJson = await readJson(join(dir, 'tokenizer.json'));
    const tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
    const special = ((tokenizerJson.added_tokens ?? []) as { content?: unknown; special?: unknown }[])
      .filter((t) => t.special === true && typeof t.content === 'string' && t.content.length > 1)
      .map((t) => (t.content as string).replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
    const markup = special.length > 0 ? new RegExp(special.join('|'), 'g') : null;
    const template = new Template(await loadChatTemplate(dir, tokenizerConfig));
    const specialTokens: Record<string, string> = {};
    for (const name of ['bos_token', 'eos_token', 'pad_token', 'unk_token']) {
      const token = tokenString(tokenizerConfig[name]);
      if (token !== undefined) specialTokens[name] = token;
    }
    const stopIds = new Set([...idList(generationConfig.eos_token_id), ...idList(config.eos_token_id)]);
    const eos =
      specialTokens.eos_token === undefined ? undefined : tokenizer.token_to_id(specialTokens.eos_token);
    if (eos !== undefined) stopIds.add(eos);
    if (stopIds.size === 0)
      throw new Error(
        `${dir}: no eos token id in config.json, generation_config.json or tokenizer_config.json`,
      );
    const chat = new ChatTokenizer(tokenizer, template, specialTokens, stopIds, markup);
    // A template that renders no plain conversation is the model's fault, found at load: once it
    // renders one, what it refuses later is the messages it was sent (see encodeChat).
    try {
      chat.encodeChat([{ role: 'user', content: 'Hello' }]);
    } catch (error) {
      throw new Error(`${dir}: the chat template cannot render a user message: ${(error as Error).message}`, {
        cause: error,
      });
    }
    return chat;
  }

  /**
   * The chat template applied with add_generation_prompt, as token ids. A message's text that
   * spells a special token (`<|im_end|>`) is encoded as text: a word joiner after its first
   * character keeps the tokenizer from reading it as the markup only the template may place, so
   * no caller can end a turn or open a system turn from inside its own message. Messages the
   * template refuses throw InvalidRequestError.
   */
  encodeChat(messages: ChatMessage[]): number[] {
    const { markup } = this;
    const safe = markup
      ? messages.map((m) => ({
          ...m,
          content: m.content.replace(markup, (t) => `${t[0]}\u2060${t.slice(1)}`),
        }))
      : messages;
    let prompt: string;
    try {
      prompt = this.template.render({ ...this.specialTokens, messages: safe, add_generation_prompt: true });
    } catch (error) {
      // Templates refuse what their model was not trained on (raise_exception): a system turn,
      // roles out of turn. The template rendered a plain conversation at load, so these messages did it.
      throw new InvalidRequestError(
        `the model's chat template refuses these messages: ${(error as Error).message}`,
      );
    }
    // The template already placed every special token (bos included), as transformers' apply_chat_template does.
    return this.tokenizer.encode(prompt, { add_special_tokens: false }).ids;
  }

  decode(ids: number[]): string {
    if (!ids.length) return ''; // tokenizers.js rejects an empty list
    return this.tokenizer.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
  }
}
