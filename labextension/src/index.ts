/**
 * nbsubagents in JupyterLab: the active runs of the current notebook's projects (those its kernel works in, and its
 * folder's) in JupyterLab's own status bar, and the saved records of runs (and of status bars) whose kernel went
 * away brought up to date in the notebook.
 *
 * Both read the server extension's endpoints (nbsubagents/lab/handlers.py): GET nbsubagents/runs,
 * GET nbsubagents/record and GET nbsubagents/bar. Nothing is rendered here that the Python package does not render itself: a record is
 * replaced by the HTML and text the server made with the kernel's own renderer.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICodeCellModel } from '@jupyterlab/cells';
import { URLExt } from '@jupyterlab/coreutils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { IStatusBar, showPopup, Popup } from '@jupyterlab/statusbar';
import { Widget } from '@lumino/widgets';

const POLL_MS = 2000;
const TERMINAL = new Set(['completed', 'failed', 'aborted']);
const BAR = 'bar:'; // a watched status_bar() record's key: its HTML after this

/** GET nbsubagents/runs (nbsubagents.lab.readers.running): the words are the server's, the panels' own. */
interface IRunRow {
  run_id: string;
  status: string; // waiting or running (queued runs are only counted)
  label: string; // as the panels name it: a sweep's cell (preset · model · task id), else name · model
  task: string;
  line: string; // glyph label · status words · the clock since the run's own start
  experiment: string;
}

interface ISweep {
  name: string;
  notebook: string; // the notebook that started it, relative to the server's root ("" if unknown)
  running: number;
  queued: number;
}

interface IRuns {
  project: string;
  summary: string; // nbsubagents: ◷ 1 waiting · ↻ 4 running · 196 queued (counts only: it never grows)
  waiting: number;
  running: number;
  queued: number;
  runs: IRunRow[];
  sweeps: ISweep[];
}

interface IRecord {
  ended: boolean;
  statuses: { [runId: string]: string };
  text?: string;
  html?: string;
}

interface IBar {
  found: boolean;
  running?: number;
  text?: string;
  html?: string;
}

async function getJSON(endpoint: string, params: URLSearchParams): Promise<any> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'nbsubagents', endpoint) + '?' + params.toString();
  const response = await ServerConnection.makeRequest(url, {}, settings);
  if (!response.ok) {
    throw new ServerConnection.ResponseError(response);
  }
  return response.json();
}

/** Who asks: the notebook's path and its kernel (the server follows the projects the kernel works in). */
function notebookParams(panel: NotebookPanel | null): URLSearchParams {
  const params = new URLSearchParams({ path: panel?.context.path ?? '' });
  const kernel = panel?.sessionContext.session?.kernel?.id;
  if (kernel) {
    params.set('kernel', kernel);
  }
  return params;
}

function div(className: string, text: string): HTMLElement {
  const node = document.createElement('div');
  node.className = className;
  node.textContent = text;
  return node;
}

/**
 * The status bar's item: the counts of the active runs in a bounded width; Enter, Space or a click opens the list
 * (waiting runs, running runs with their clocks, the queued ones as one line, each sweep with a way to its notebook),
 * bounded by the window and scrolling; Escape closes it.
 */
class RunsItem extends Widget {
  data: IRuns | null = null;
  private _popup: Popup | null = null;
  private _list: HTMLElement | null = null;

  constructor(private _app: JupyterFrontEnd) {
    super();
    this.addClass('jp-StatusBar-TextItem');
    this.addClass('nbsubagents-lab-status');
    const node = this.node;
    node.tabIndex = 0;
    node.setAttribute('role', 'button');
    node.setAttribute('aria-haspopup', 'dialog');
    node.setAttribute('aria-expanded', 'false');
    Object.assign(node.style, {
      cursor: 'pointer',
      maxWidth: '30em',
      overflow: 'hidden',
      textOverflow: 'ellipsis',
      whiteSpace: 'nowrap',
      fontVariantNumeric: 'tabular-nums'
    });
    node.textContent = 'nbsubagents';
    this.label('nbsubagents');
    node.addEventListener('click', () => this.toggle());
    node.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        this.toggle(true);
      } else if (event.key === 'Escape' && this.open) {
        event.preventDefault();
        this.closeList();
      }
    });
  }

  get open(): boolean {
    return !!this._popup && !this._popup.isDisposed;
  }

  private label(summary: string): void {
    const words = `${summary} (Enter or click lists the runs)`;
    this.node.title = words;
    this.node.setAttribute('aria-label', words);
  }

  show_(data: IRuns | null, error?: string): void {
    this.data = data;
    const summary = data ? data.summary : `nbsubagents: ${error ?? 'no answer'}`;
    if (this.node.textContent !== summary) {
      this.node.textContent = summary;
      this.label(summary);
    }
    if (this.open && this._list) {
      const scroll = this._list.scrollTop;
      this._list.replaceChildren(...this.lines());
      this._list.scrollTop = scroll;
    }
  }

  private closeList(): void {
    if (this._popup && !this._popup.isDisposed) {
      this._popup.dispose();
    }
  }

  private toggle(focus = false): void {
    if (this.open) {
      this.closeList();
      return;
    }
    const body = new Widget();
    body.addClass('nbsubagents-lab-runs');
    const box = body.node;
    box.setAttribute('role', 'dialog');
    box.setAttribute('aria-label', 'nbsubagents: the active runs');
    box.tabIndex = -1;
    Object.assign(box.style, {
      padding: '6px 10px',
      fontSize: 'var(--jp-ui-font-size1)',
      overflowY: 'auto',
      overflowX: 'hidden',
      boxSizing: 'border-box',
      background: 'var(--jp-layout-color1)', // the theme's own surface: nothing behind shows through
      color: 'var(--jp-ui-font-color1)',
      border: 'var(--jp-border-width) solid var(--jp-border-color1)',
      // within the window: HoverBox keeps it above the bar and at most this tall; a list longer scrolls
      maxHeight: `${Math.max(120, Math.floor(window.innerHeight * 0.6))}px`,
      maxWidth: `${Math.max(240, Math.min(560, window.innerWidth - 24))}px`
    });
    this._list = document.createElement('div');
    this._list.replaceChildren(...this.lines());
    box.appendChild(this._list);
    const popup = showPopup({ body, anchor: this, align: 'left', hasDynamicSize: true });
    this._popup = popup;
    this.node.setAttribute('aria-expanded', 'true');
    popup.disposed.connect(() => {
      const had = popup.node.contains(document.activeElement);
      this.node.setAttribute('aria-expanded', 'false');
      this._list = null;
      if (had || focus) {
        this.node.focus();
      }
    });
    // within the window across: the popup starts where the item does; pulled left when it would cross the edge
    const rect = popup.node.getBoundingClientRect();
    if (rect.right > window.innerWidth - 4) {
      popup.node.style.left = `${Math.max(4, window.innerWidth - 4 - rect.width)}px`;
    }
    if (focus) {
      box.focus();
    }
  }

  /** The head, then each sweep, the waiting runs, the running runs and the queued ones as one line. */
  private lines(): HTMLElement[] {
    const data = this.data;
    if (!data) {
      return [div('nbsubagents-lab-none', 'nbsubagents: no answer from the server')];
    }
    const project = data.project.split('/').pop() || data.project;
    if (!data.runs.length && !data.queued) {
      return [div('nbsubagents-lab-none', `No run of ${project} is running.`)];
    }
    const head = div('nbsubagents-lab-head', `Runs of ${project}`);
    head.title = data.project;
    head.style.fontWeight = '600';
    const out = [head];
    for (const sweep of data.sweeps) {
      out.push(this.sweepLine(sweep));
    }
    for (const run of data.runs) {
      const line = div(`nbsubagents-lab-run nbsubagents-status-${run.status}`, run.line);
      line.dataset.runId = run.run_id;
      line.dataset.label = run.label;
      line.dataset.experiment = run.experiment;
      line.title = `${run.task} · run ${run.run_id}`;
      Object.assign(line.style, { whiteSpace: 'nowrap', overflow: 'hidden', textOverflow: 'ellipsis' });
      out.push(line);
    }
    if (data.queued) {
      out.push(div('nbsubagents-lab-queued nbsubagents-status-queued', `○ ${data.queued} queued`));
    }
    return out;
  }

  /** ``Sweep NAME: 2 running · 58 queued``, and a button to the notebook that shows its panel. */
  private sweepLine(sweep: ISweep): HTMLElement {
    const line = div('nbsubagents-lab-sweep', `Sweep ${sweep.name}: ${sweep.running} running · ${sweep.queued} queued`);
    line.dataset.sweep = sweep.name;
    if (sweep.notebook) {
      const button = document.createElement('button');
      button.className = 'jp-Button jp-mod-minimal nbsubagents-lab-sweep-open';
      button.textContent = 'show its panel';
      button.title = `open ${sweep.notebook} at the sweep's panel`;
      button.style.marginLeft = '0.5em';
      button.addEventListener('click', () => void this.reveal(sweep.notebook));
      line.appendChild(button);
    }
    return line;
  }

  /** Open the notebook and bring its sweep panel into view. */
  private async reveal(path: string): Promise<void> {
    this.closeList();
    const widget: any = await this._app.commands.execute('docmanager:open', { path });
    await widget?.context?.ready;
    for (let i = 0; i < 20; i++) {
      const found = widget?.node?.querySelector('.nbsubagents-sweep');
      if (found) {
        found.scrollIntoView({ block: 'center' });
        return;
      }
      await new Promise(resolve => window.setTimeout(resolve, 250));
    }
  }
}

/** The text of an output's mimetype (nbformat may keep it as a list of lines). */
function mimeText(value: unknown): string {
  if (typeof value === 'string') {
    return value;
  }
  return Array.isArray(value) ? value.join('') : '';
}

interface IShownRecord {
  index: number;
  bar: boolean; // a status_bar() record (its runs are counted, not named)
  runIds: string[]; // every run the record shows (one, or a group's)
  open: string[]; // those it shows not ended (running, queued, unknown)
  group: boolean;
  html: string; // as found: the output is replaced only if it still holds this
}

/** The static records of runs in one output list that show a run not ended. */
function openRecords(cell: ICodeCellModel): IShownRecord[] {
  const found: IShownRecord[] = [];
  for (let index = 0; index < cell.outputs.length; index++) {
    const html = mimeText(cell.outputs.get(index).data['text/html']);
    if (!html.includes('nbsubagents-static') && !html.includes('nbsubagents-statusbar')) {
      continue;
    }
    const doc = new DOMParser().parseFromString(html, 'text/html');
    // the record itself, not a view that holds records (a sweep, a browser); a style block before it aside
    const root = Array.from(doc.body.children).find(e => e.tagName !== 'STYLE' && e.tagName !== 'SCRIPT');
    if (!root) {
      continue;
    }
    if (root.classList.contains('nbsubagents-statusbar')) {
      // "runs: 3 running / …": still running as of its stamp (data-running; an older record says it in words)
      const said = root.getAttribute('data-running') ?? /runs: (\d+) running/.exec(root.textContent ?? '')?.[1];
      if (Number(said ?? 0) > 0) {
        found.push({ index, bar: true, runIds: [], open: [], group: false, html });
      }
      continue;
    }
    const group = root.classList.contains('nbsubagents-static-group');
    const single = root.matches('.nbsubagents-static[data-run-id]');
    const panels = Array.from(doc.querySelectorAll<HTMLElement>('.nbsubagents-static[data-run-id]'));
    const runIds = panels.map(p => p.dataset.runId as string);
    const open = panels
      .filter(p => {
        const status = Array.from(p.classList).find(c => c.startsWith('nbsubagents-status-'));
        return !status || !TERMINAL.has(status.slice('nbsubagents-status-'.length));
      })
      .map(p => p.dataset.runId as string);
    if (open.length && (group || single)) {
      found.push({ index, bar: false, runIds, open, group, html });
    }
  }
  return found;
}

function codeCells(panel: NotebookPanel): ICodeCellModel[] {
  const model = panel.content.model;
  const cells: ICodeCellModel[] = [];
  if (!model) {
    return cells;
  }
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    if (cell.type === 'code') {
      cells.push(cell as ICodeCellModel);
    }
  }
  return cells;
}

/**
 * Records a gone kernel left behind, per notebook: the runs they show not ended, and the ``status_bar()`` records that
 * say runs go (kept by their HTML, ``bar:`` before it), found when the notebook opens and when its kernel restarts or
 * changes (a live kernel updates its own records; those are never touched).
 */
class RecordKeeper {
  private _watched = new Map<NotebookPanel, Set<string>>();

  watch(panel: NotebookPanel): void {
    const look = () => this.mark(panel);
    void panel.context.ready.then(look);
    panel.sessionContext.statusChanged.connect((_, status) => {
      if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
        look();
      }
    });
    panel.sessionContext.kernelChanged.connect(look);
    panel.disposed.connect(() => this._watched.delete(panel));
  }

  /** The runs the records of ``panel`` show not ended now: theirs are the records to bring up to date. */
  mark(panel: NotebookPanel): void {
    const runs = this._watched.get(panel) ?? new Set<string>();
    for (const cell of codeCells(panel)) {
      for (const record of openRecords(cell)) {
        record.open.forEach(id => runs.add(id));
        if (record.bar) {
          runs.add(BAR + record.html);
        }
      }
    }
    if (runs.size) {
      this._watched.set(panel, runs);
    }
  }

  /** Ask the server about every watched record; replace those whose runs all ended, in the notebook's model. */
  async tick(): Promise<void> {
    for (const [panel, watched] of Array.from(this._watched)) {
      const runs = new Set(watched); // those asked about now (a restart meanwhile may mark more)
      const still = new Set<string>();
      for (const cell of codeCells(panel)) {
        for (const record of openRecords(cell)) {
          if (record.bar) {
            if (runs.has(BAR + record.html)) {
              await this.bar(panel, cell, record, still);
            }
            continue;
          }
          if (!record.open.some(id => runs.has(id))) {
            continue; // drawn by the kernel that runs now: it keeps it true
          }
          const params = notebookParams(panel);
          record.runIds.forEach(id => params.append('run_id', id));
          if (record.group) {
            params.set('group', '1');
          }
          let answer: IRecord;
          try {
            answer = await getJSON('record', params);
          } catch (error) {
            console.warn('nbsubagents: could not read the record of', record.runIds, error);
            record.open.forEach(id => still.add(id));
            continue;
          }
          const now = record.index < cell.outputs.length ? cell.outputs.get(record.index) : null;
          if (!now || mimeText(now.data['text/html']) !== record.html) {
            record.open.forEach(id => still.add(id)); // the output changed meanwhile: looked at again next time
            continue;
          }
          if (answer.ended && answer.html !== undefined && answer.text !== undefined) {
            const output = now.toJSON() as any;
            output.data = { 'text/plain': answer.text, 'text/html': answer.html };
            output.metadata = {};
            cell.outputs.set(record.index, output);
          } else {
            // a run the project's registry does not know is dropped: no answer will come for it
            record.open.filter(id => answer.statuses[id] !== 'missing').forEach(id => still.add(id));
          }
        }
      }
      (this._watched.get(panel) ?? []).forEach(id => runs.has(id) || still.add(id)); // marked meanwhile
      if (still.size) {
        this._watched.set(panel, still);
      } else {
        this._watched.delete(panel);
      }
    }
  }

  /** A status_bar() record as of now; watched again while it says runs go. */
  private async bar(panel: NotebookPanel, cell: ICodeCellModel, record: IShownRecord, still: Set<string>) {
    let answer: IBar;
    try {
      answer = await getJSON('bar', notebookParams(panel));
    } catch (error) {
      console.warn('nbsubagents: could not read the status bar of', panel.context.path, error);
      still.add(BAR + record.html);
      return;
    }
    const now = record.index < cell.outputs.length ? cell.outputs.get(record.index) : null;
    if (!now || mimeText(now.data['text/html']) !== record.html) {
      return; // redrawn meanwhile (by a kernel that keeps it true)
    }
    if (!answer.found || answer.html === undefined || answer.text === undefined) {
      return; // no project of this notebook has a registry: no answer will come
    }
    const output = now.toJSON() as any;
    output.data = { 'text/plain': answer.text, 'text/html': answer.html };
    output.metadata = {};
    cell.outputs.set(record.index, output);
    if (answer.running) {
      still.add(BAR + answer.html);
    }
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'nbsubagents:plugin',
  description: 'nbsubagents: running runs in the status bar; saved records of runs brought up to date',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [IStatusBar],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, statusBar: IStatusBar | null) => {
    const keeper = new RecordKeeper();
    tracker.forEach(panel => keeper.watch(panel));
    tracker.widgetAdded.connect((_, panel) => keeper.watch(panel));

    const item = new RunsItem(app);
    if (statusBar) {
      statusBar.registerStatusItem('nbsubagents:runs', { item, align: 'left', rank: 100 });
    }
    let busy = false;
    const tick = async () => {
      if (busy) {
        return;
      }
      busy = true;
      try {
        if (statusBar) {
          try {
            item.show_(await getJSON('runs', notebookParams(tracker.currentWidget)));
          } catch (error) {
            item.show_(null, 'no answer from the server');
          }
        }
        await keeper.tick();
      } finally {
        busy = false;
      }
    };
    void tick();
    window.setInterval(() => void tick(), POLL_MS);
  }
};

export default plugin;
