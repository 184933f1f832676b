// Go's text/tabwriter (space padding, no flags), which istioctl's tables are printed with: cells end at tabs,
// a column's width is the widest cell of the consecutive lines that have that column plus the padding, and
// the text after a line's last tab is not part of any column.

export class TabWriter {
  private text = '';

  constructor(
    private readonly minwidth: number,
    private readonly padding: number,
  ) {}

  write(s: string): this {
    this.text += s;
    return this;
  }

  /** fmt.Fprintln of the cells joined with tabs. */
  row(...cells: Array<string | number | boolean>): this {
    return this.write(cells.join('\t') + '\n');
  }

  /** The formatted text. */
  flush(): string {
    if (this.text === '') return '';
    const endsWithNewline = this.text.endsWith('\n');
    const lines = (endsWithNewline ? this.text.slice(0, -1) : this.text).split('\n').map((l) => l.split('\t'));
    const widths: number[] = [];
    let out = '';
    const width = (s: string) => [...s].length;
    const writeLines = (line0: number, line1: number) => {
      for (let i = line0; i < line1; i++) {
        const line = lines[i]!;
        line.forEach((cell, j) => {
          out += cell;
          if (j < widths.length && j < line.length - 1) out += ' '.repeat(Math.max(0, widths[j]! - width(cell)));
        });
        if (i + 1 < lines.length || endsWithNewline) out += '\n';
      }
    };
    const format = (line0: number, line1: number) => {
      const column = widths.length;
      for (let self = line0; self < line1; self++) {
        if (column >= lines[self]!.length - 1) continue;
        writeLines(line0, self);
        line0 = self;
        let w = this.minwidth;
        for (; self < line1; self++) {
          const line = lines[self]!;
          if (column >= line.length - 1) break;
          w = Math.max(w, width(line[column]!) + this.padding);
        }
        widths.push(w);
        format(line0, self);
        widths.pop();
        line0 = self;
        // Go's loop moves past the line that ended the block; it has no cell in this column anyway.
      }
      writeLines(line0, line1);
    };
    format(0, lines.length);
    return out;
  }
}
