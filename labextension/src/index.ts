/**
 * nbsubagents in JupyterLab: the running runs of the current notebook's project in JupyterLab's own status bar,
 * and the saved records of runs whose kernel went away brought up to date in the notebook.
 *
 * Both read the server extension's endpoints (nbsubagents/lab/handlers.py): GET nbsubagents/runs and
 * GET nbsubagents/record. Nothing is rendered here that the Python package does not render itself: a record is
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

/** GET nbsubagents/runs (nbsubagents.lab.readers.running): the words are the server's. */
interface IRunRow {
  run_id: string;
  status: string;
  task: string;
  line: string; // name · status (or "waiting for an answer") · clock · run id
}

interface IRuns {
  project: string;
  summary: string; // nbsubagents: 2 running · 1 waiting · scout 12s · fixer 3.1s
  runs: IRunRow[];
}

interface IRecord {
  ended: boolean;
  statuses: { [runId: string]: string };
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

/** The status bar's item: the running runs with their clocks; a click lists them. */
class RunsItem extends Widget {
  data: IRuns | null = null;
  private _popup: Popup | null = null;

  constructor() {
    super();
    this.addClass('jp-StatusBar-TextItem');
    this.addClass('nbsubagents-lab-status');
    this.node.title = 'nbsubagents: the runs of this notebook\'s project (click to list them)';
    this.node.style.cursor = 'pointer';
    this.node.textContent = 'nbsubagents';
    this.node.addEventListener('click', () => this.toggle());
  }

  show_(data: IRuns | null, error?: string): void {
    this.data = data;
    this.node.textContent = data ? data.summary : `nbsubagents: ${error ?? 'no answer'}`;
    if (this._popup && !this._popup.isDisposed) {
      this._popup.node.replaceChildren(this.list());
    }
  }

  private toggle(): void {
    if (this._popup && !this._popup.isDisposed) {
      this._popup.dispose();
      this._popup = null;
      return;
    }
    const body = new Widget();
    body.addClass('nbsubagents-lab-runs');
    body.node.appendChild(this.list());
    this._popup = showPopup({ body, anchor: this, align: 'left', hasDynamicSize: true });
  }

  /** One line per active run: its name, status (or "waiting for an answer"), clock and id. */
  private list(): HTMLElement {
    const box = document.createElement('div');
    box.style.padding = '6px 10px';
    box.style.fontSize = 'var(--jp-ui-font-size1)';
    const data = this.data;
    if (!data || !data.runs.length) {
      box.textContent = data ? `No run of ${data.project} is running.` : 'nbsubagents: no answer from the server';
      return box;
    }
    const head = document.createElement('div');
    head.textContent = `Runs of ${data.project}`;
    head.style.fontWeight = '600';
    box.appendChild(head);
    for (const run of data.runs) {
      const line = document.createElement('div');
      line.className = `nbsubagents-lab-run nbsubagents-status-${run.status}`;
      line.dataset.runId = run.run_id;
      line.textContent = run.line;
      line.title = run.task;
      box.appendChild(line);
    }
    return box;
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
    if (!html.includes('nbsubagents-static')) {
      continue;
    }
    const doc = new DOMParser().parseFromString(html, 'text/html');
    // the record itself, not a view that holds records (a sweep, a browser); a style block before it aside
    const root = Array.from(doc.body.children).find(e => e.tagName !== 'STYLE' && e.tagName !== 'SCRIPT');
    if (!root) {
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
      found.push({ index, runIds, open, group, html });
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
 * Records a gone kernel left behind, per notebook: the runs they show not ended, found when the notebook opens
 * and when its kernel restarts or changes (a live kernel updates its own records; those are never touched).
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
          if (!record.open.some(id => runs.has(id))) {
            continue; // drawn by the kernel that runs now: it keeps it true
          }
          const params = new URLSearchParams({ path: panel.context.path });
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
      (this._watched.get(panel) ?? []).forEach(id => runs.has(id) || still.add(id));
      if (still.size) {
        this._watched.set(panel, still);
      } else {
        this._watched.delete(panel);
      }
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

    const item = new RunsItem();
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
          const params = new URLSearchParams({ path: tracker.currentWidget?.context.path ?? '' });
          try {
            item.show_(await getJSON('runs', params));
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
